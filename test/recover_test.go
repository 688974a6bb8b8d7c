package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// The gateway sends requests of its own through the rest of the route:
// notifications/cancelled, for a call whose client left (on a goroutine of
// its own) and for a call cut at its deadline (on the call's goroutine,
// once its client has its TIMEOUT, or once it is gone). Whatever the
// route does with them (an upstream that resets the connection, answers
// half a body or cuts its event stream, so that reverse_proxy panics with
// http.ErrAbortHandler, or a handler after mcp that panics), Caddy goes on
// serving, the call's connection with it, and the log says what happened
// once. Found by an attacker's review: a client leaving a call, and an
// upstream breaking its answer to the cancellation, stopped Caddy.

func init() {
	caddy.RegisterModule(panicOnCancelled{})
	httpcaddyfile.RegisterHandlerDirective("panic_on_cancelled", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h.Next()
		return panicOnCancelled{}, nil
	})
}

// panicOnCancelled is a handler that panics on a notifications/cancelled,
// with a value other than http.ErrAbortHandler, and passes anything else
// on. It tells panickedOn of each panic.
type panicOnCancelled struct{}

// panickedOn is told the body of each notification panicOnCancelled
// panicked on (the gateway tests run one at a time).
var panickedOn = make(chan string, 16)

// errCancelledPanic is the value panicOnCancelled panics with.
var errCancelledPanic = errors.New("the test's handler panics on notifications/cancelled")

func (panicOnCancelled) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.panic_on_cancelled", New: func() caddy.Module { return new(panicOnCancelled) }}
}

func (panicOnCancelled) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
		panickedOn <- string(body)
		panic(errCancelledPanic)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return next.ServeHTTP(w, r)
}

// How the route takes the gateway's notifications/cancelled.
const (
	resetsTheConnection = "the upstream resets the connection"
	answersHalfABody    = "the upstream answers half a body"
	cutsItsEventStream  = "the upstream cuts its event stream"
	panicsAfterMCP      = "a handler after mcp panics"
)

var misbehaviours = []string{resetsTheConnection, answersHalfABody, cutsItsEventStream, panicsAfterMCP}

// brokenCanceller is an upstream that takes tools/call as its tool says
// (hang: never answers; primed: opens an event stream with an event that
// carries an id, so that the client may resume it, and never answers;
// echo: answers at once), and takes notifications/cancelled as its
// misbehaviour says. It tells started of each call that begins, and
// cancelled of each notification it receives.
type brokenCanceller struct {
	addr      string
	started   chan string
	cancelled chan string
}

func startBrokenCanceller(t *testing.T, misbehaviour string) *brokenCanceller {
	t.Helper()
	b := &brokenCanceller{started: make(chan string, 8), cancelled: make(chan string, 8)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method == "notifications/cancelled" {
			b.cancelled <- string(body)
			b.misbehave(w, misbehaviour)
			return
		}
		if msg.Method != "tools/call" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		b.started <- msg.Params.Name
		switch msg.Params.Name {
		case "echo":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"echoed"}]}}`, msg.ID)
		case "primed":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: primed-1\ndata: \n\n")
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
		default:
			<-r.Context().Done()
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	b.addr = strings.TrimPrefix(srv.URL, "http://")
	return b
}

// misbehave answers a notification as misbehaviour says; a handler after
// mcp panics before the notification gets here, and it is accepted then.
func (b *brokenCanceller) misbehave(w http.ResponseWriter, misbehaviour string) {
	flush := http.NewResponseController(w).Flush
	switch misbehaviour {
	case resetsTheConnection:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	case answersHalfABody:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "200")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0",`)
		_ = flush()
		panic(http.ErrAbortHandler)
	case cutsItsEventStream:
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":")
		_ = flush()
		panic(http.ErrAbortHandler)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// cancellationGateway starts a gateway in front of b, logging at debug to
// a file of its own, with mcp configured by mcp, and a handler that panics
// on notifications/cancelled after it when misbehaviour says so. It
// returns the gateway and its log file.
func cancellationGateway(t *testing.T, b *brokenCanceller, misbehaviour, mcp string) (*mcptest.Gateway, string) {
	t.Helper()
	after := ""
	if misbehaviour == panicsAfterMCP {
		after = "\tpanic_on_cancelled\n"
	}
	logFile := tempLog(t, "caddy.log")
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Admin: true,
		Log:   "output file " + logFile + "\nformat json\nlevel DEBUG",
		Site:  fmt.Sprintf("route {\n\tmcp {\n%s\n\t}\n%s\treverse_proxy %s\n}", mcp, after, b.addr),
	})
	return g, logFile
}

// Why the gateway cancels, as it tells the upstream.
const (
	clientLeft     = "the client left"
	deadlinePassed = "the gateway's deadline for this tool passed"
)

// cancellationTaken waits until the route has taken the gateway's
// notifications/cancelled of the call id, for reason: the upstream
// received it, or the handler after mcp panicked on it.
func (b *brokenCanceller) cancellationTaken(t *testing.T, misbehaviour, id, reason string) {
	t.Helper()
	from := b.cancelled
	if misbehaviour == panicsAfterMCP {
		from = panickedOn
	}
	var msg struct {
		Params struct {
			RequestID string `json:"requestId"`
			Reason    string `json:"reason"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal([]byte(within(t, from, "notifications/cancelled")), &msg))
	assert.Equal(t, id, msg.Params.RequestID)
	assert.Equal(t, reason, msg.Params.Reason)
}

// cancellationLogged runs later, a later call, then waits for the line
// the handler's log gives the notification as misbehaviour took it, and
// checks that it is the only one.
func cancellationLogged(t *testing.T, logFile, misbehaviour string, later func()) {
	t.Helper()
	msg, level := "the upstream broke its answer to a request the gateway sent itself", "debug"
	switch misbehaviour {
	case resetsTheConnection:
		msg = "notifications/cancelled not taken by the upstream"
	case panicsAfterMCP:
		msg, level = "recovered a panic", "error"
	}
	told := func(l map[string]any) bool {
		return l["logger"] == handlerLogger && (l["msg"] == msg || l["msg"] == "recovered a panic" ||
			strings.Contains(fmt.Sprint(l["msg"]), "the upstream broke its answer"))
	}
	later()
	lines := waitLines(t, logFile, 1, told)
	require.Len(t, lines, 1, "the log tells what became of the cancellation, once: %v", lines)
	assert.Equal(t, msg, lines[0]["msg"])
	assert.Equal(t, level, lines[0]["level"])
	if misbehaviour == panicsAfterMCP {
		assert.Equal(t, "cancellation", lines[0]["site"])
		assert.Equal(t, errCancelledPanic.Error(), lines[0]["panic"])
		assert.Contains(t, lines[0]["stack"], "test.panicOnCancelled.ServeHTTP", "the stack is the panic's")
	}
}

// panicsRecovered is the count of panics recovered at the cancellation.
const panicsRecovered = `caddy_mcp_panics_recovered_total{site="cancellation"}`

// recoveredOnce checks that a panic of the handler after mcp, and only
// that, is counted as a recovered panic.
func recoveredOnce(t *testing.T, adminURL, misbehaviour string, before float64) {
	t.Helper()
	want := before
	if misbehaviour == panicsAfterMCP {
		want++
	}
	assert.Equal(t, want, mcpMetrics(t, adminURL)[panicsRecovered])
}

func TestCaddyServesOnWhenTheCancellationOfACallWhoseClientLeftBreaks(t *testing.T) {
	for _, misbehaviour := range misbehaviours {
		t.Run(misbehaviour, func(t *testing.T) {
			b := startBrokenCanceller(t, misbehaviour)
			// Two places, held an hour after a client left: the call left
			// behind holds one, and the later call takes the other.
			g, logFile := cancellationGateway(t, b, misbehaviour, "\t\tconcurrency {\n\t\t\tmax 2\n\t\t\tcancel_grace 1h\n\t\t}")
			endpoint := g.URL + mcptest.MCPPath
			before := mcpMetrics(t, g.AdminURL)[panicsRecovered]

			ctx, leave := context.WithCancel(t.Context())
			left := postAsync(t, endpoint, wire.ToolCall("left", "hang"), withContext(ctx))
			require.Equal(t, "hang", within(t, b.started, "the call begin"))
			leave()
			<-left
			b.cancellationTaken(t, misbehaviour, "left", clientLeft)
			cancellationLogged(t, logFile, misbehaviour, func() {
				_, body := post(t, endpoint, wire.ToolCall("later", "echo"))
				assert.Equal(t, "done", wire.Outcome(body), "Caddy still serves")
			})
			recoveredOnce(t, g.AdminURL, misbehaviour, before)
		})
	}
}

func TestCaddyServesOnWhenTheCancellationOfACallPastItsDeadlineBreaks(t *testing.T) {
	for _, misbehaviour := range misbehaviours {
		t.Run(misbehaviour, func(t *testing.T) {
			b := startBrokenCanceller(t, misbehaviour)
			g, logFile := cancellationGateway(t, b, misbehaviour, "\t\ttools {\n\t\t\ttimeout hang 1s\n\t\t}")
			before := mcpMetrics(t, g.AdminURL)[panicsRecovered]

			// One connection for both calls: the call's connection
			// outlives its cancellation.
			conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			br := bufio.NewReader(conn)
			status, body, err := exchangeOn(conn, br, wire.ToolCall("cut", "hang"))
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, status)
			assert.Equal(t, "TIMEOUT", wire.Outcome(body))
			b.cancellationTaken(t, misbehaviour, "cut", deadlinePassed)
			cancellationLogged(t, logFile, misbehaviour, func() {
				status, body, err := exchangeOn(conn, br, wire.ToolCall("later", "echo"))
				require.NoError(t, err, "the connection of the call cut at its deadline was kept")
				assert.Equal(t, http.StatusOK, status)
				assert.Equal(t, "done", wire.Outcome(body))
			})
			recoveredOnce(t, g.AdminURL, misbehaviour, before)
		})
	}
}

func TestCaddyServesOnWhenTheCancellationOfACallPastItsDeadlineWhoseClientLeftBreaks(t *testing.T) {
	for _, misbehaviour := range misbehaviours {
		t.Run(misbehaviour, func(t *testing.T) {
			b := startBrokenCanceller(t, misbehaviour)
			// The client may resume the call's stream: its leaving cancels
			// nothing, and the call holds its place until its deadline.
			g, logFile := cancellationGateway(t, b, misbehaviour,
				"\t\ttools {\n\t\t\ttimeout primed 1s\n\t\t}\n\t\tconcurrency {\n\t\t\tmax 1\n\t\t\tcancel_grace 1h\n\t\t}")
			endpoint := g.URL + mcptest.MCPPath
			before := mcpMetrics(t, g.AdminURL)[panicsRecovered]

			ctx, leave := context.WithCancel(t.Context())
			resp, err := open(endpoint, wire.ToolCall("primed", "primed"), withContext(ctx))
			require.NoError(t, err)
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "id: primed-1\n", line, "the stream's first event carries an id")
			leave()
			resp.Body.Close()
			b.cancellationTaken(t, misbehaviour, "primed", deadlinePassed)
			cancellationLogged(t, logFile, misbehaviour, func() {
				_, body := post(t, endpoint, wire.ToolCall("later", "echo"))
				assert.Equal(t, "done", wire.Outcome(body), "Caddy still serves, and the place came back")
			})
			recoveredOnce(t, g.AdminURL, misbehaviour, before)
			for _, l := range jsonLines(t, logFile) {
				assert.False(t, l["logger"] == handlerLogger && l["code"] == "TIMEOUT", "the client was gone at the deadline: %v", l)
			}
		})
	}
}

// exchangeOn sends body as a POST on conn, and reads the answer from br:
// its status and body.
func exchangeOn(conn net.Conn, br *bufio.Reader, body string) (int, []byte, error) {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetDeadline(time.Time{})
	addr := conn.RemoteAddr().String()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		mcptest.MCPPath, addr, len(body), body); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
