package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// A request holding guard places whose client leaves: the upstream is told
// to stop its calls at once, and the places come back when the upstream
// answers or, at the latest, cancel_grace after the client left. Found by
// an attacker's review: a client that gave up on a call its server never
// answered held the only place of a guard of max 1 for good.

// stopWatch is an MCP server, the official Go SDK's, whose tools run until
// they are told to stop:
//   - stop runs until its call is cancelled, and then answers, as the SDK
//     does for a cancelled call;
//   - hang runs until the test ends, whatever it is told;
//   - echo answers at once.
//
// It tells each call of stop or hang that begins, each cancellation a tool
// sees, and each tools/call POST whose stream the gateway closed before
// the answer; it keeps the ids of the calls it received and of those it
// was told to cancel.
type stopWatch struct {
	endpoint string
	started  chan string
	stopped  chan string
	closed   chan string

	mu               sync.Mutex
	called, canceled []string
}

// ids are the ids of the calls received, and of the calls cancelled.
func (s *stopWatch) ids() (called, canceled []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.called), slices.Clone(s.canceled)
}

// How a stopWatch serves: with sessions (the 2025 eras); with sessions and
// streams whose events carry ids (an event store), so that a client may
// resume them; or stateless, as the SDK serves MCP 2026-07-28.
const (
	withSessions = iota
	resumableStreams
	stateless
)

// startStopWatch starts a stopWatch that serves as mode says.
func startStopWatch(t *testing.T, mode int) *stopWatch {
	t.Helper()
	s := &stopWatch{started: make(chan string, 64), stopped: make(chan string, 64), closed: make(chan string, 64)}
	end := make(chan struct{})
	server := mcp.NewServer(&mcp.Implementation{Name: "stop-watch", Version: "1"}, nil)
	run := func(name string, untilEnd bool) {
		mcp.AddTool(server, &mcp.Tool{Name: name}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.started <- name
			select {
			case <-ctx.Done():
				s.stopped <- name
			case <-end:
				return nil, nil, errors.New("the test ended")
			}
			if untilEnd {
				<-end
			}
			return nil, nil, ctx.Err()
		})
	}
	run("stop", false)
	run("hang", true)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echoed"}}}, nil, nil
	})
	opts := &mcp.StreamableHTTPOptions{}
	switch mode {
	case resumableStreams:
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	case stateless:
		opts.Stateless = true
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	s.endpoint = mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		switch msg.Method {
		case "notifications/cancelled":
			s.mu.Lock()
			s.canceled = append(s.canceled, string(msg.Params.RequestID))
			s.mu.Unlock()
		case "tools/call":
			s.mu.Lock()
			s.called = append(s.called, string(msg.ID))
			s.mu.Unlock()
			rec := &answerWatch{ResponseWriter: w}
			defer rec.watchCut(r.Context(), func() { s.closed <- msg.Params.Name })()
			w = rec
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(end) })
	return s
}

// answerWatch tells whether a tool result went out.
type answerWatch struct {
	http.ResponseWriter
	answered atomic.Bool
}

func (a *answerWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"result"`)) || bytes.Contains(p, []byte(`"error"`)) {
		a.answered.Store(true)
	}
	return a.ResponseWriter.Write(p)
}

func (a *answerWatch) Flush() { http.NewResponseController(a.ResponseWriter).Flush() }

// watchCut calls cut once if ctx, the request's, ends while its handler
// runs and before a tool result went out: its client, the gateway, closed
// the request. The handler defers the function it returns.
//
// The request is watched, not the handler's return: the SDK may go on
// running a call whose stream closed. And the handler's return is watched
// too: a context closes its Done before it runs its AfterFuncs, so a
// handler that wakes on Done (the SDK's, when the connection closes) may
// return, and stop the AfterFunc, before it ran. net/http ends ctx only
// once the handler has returned, so ctx ended at that return is a cut.
func (a *answerWatch) watchCut(ctx context.Context, cut func()) (handlerReturned func()) {
	seen := func() {
		if !a.answered.Load() {
			cut()
		}
	}
	stop := context.AfterFunc(ctx, seen)
	return func() {
		if stop() && ctx.Err() != nil {
			seen()
		}
	}
}

// outcomeOf is wire.Outcome of an answer in JSON or as an event stream,
// whose last event with data holds the response.
func outcomeOf(body []byte) string {
	events := parseSSE(body)
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].data != "" {
			return wire.Outcome([]byte(events[i].data))
		}
	}
	return wire.Outcome(body)
}

// guardedSite is a site whose guard has one place, with the given
// cancel_grace, in front of endpoint.
func guardedSite(endpoint, grace string) string {
	return fmt.Sprintf("mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tcancel_grace %s\n\t}\n}\n%s", grace, mcptest.ProxyTo(endpoint))
}

// sessionCall is a tools/call of tool on session, in the 2025-06-18 era.
func sessionCall(session string) sendOption {
	return withHeader("Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-06-18")
}

// statelessCall is a tools/call of tool with id, as MCP 2026-07-28 sends
// it: the version in _meta and in the headers.
func statelessCall(id, tool string) (string, sendOption) {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, id, tool),
		withHeader("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool)
}

// leave sends body, a call of tool, and leaves once the tool has begun;
// it returns when the client has left.
func leave(t *testing.T, s *stopWatch, endpoint, body, tool string, opts ...sendOption) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	left := postAsync(t, endpoint, body, append(opts, withContext(ctx))...)
	require.Equal(t, tool, within(t, s.started, "the call begin"))
	cancel()
	<-left
}

// placesFree waits until the guard holds no place.
func placesFree(t *testing.T, adminURL string) {
	t.Helper()
	waitStatus(t, adminURL, func(s gatewayStatus) bool { return s.Handlers[0].Features.Concurrency.Active == 0 })
}

func TestAClientThatLeavesCancelsItsCallAndGetsItsPlaceBackWhenTheUpstreamAnswers(t *testing.T) {
	s := startStopWatch(t, withSessions)
	// A grace of an hour: the place can only come back with the answer.
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: guardedSite(s.endpoint, "1h")})
	endpoint := g.URL + mcptest.MCPPath
	session := initSession(t, endpoint)
	const cancelled = `caddy_mcp_cancellations_total{reason="client_left"}`
	before := mcpMetrics(t, g.AdminURL)[cancelled]

	leave(t, s, endpoint, wire.ToolCall("left-stop", "stop"), "stop", sessionCall(session))
	assert.Equal(t, "stop", within(t, s.stopped, "the cancellation"))
	placesFree(t, g.AdminURL)
	assert.Equal(t, before+1, mcpMetrics(t, g.AdminURL)[cancelled])
	_, body := post(t, endpoint, wire.ToolCall("next", "echo"), sessionCall(session))
	assert.Equal(t, "done", outcomeOf(body), "the place is free once the upstream answered")
	_, canceled := s.ids()
	assert.Equal(t, []string{`"left-stop"`}, canceled, "notifications/cancelled sent")
}

// A call the upstream does not stop keeps its place for the grace, then
// the gateway cuts it and the place comes back.
func TestAHungCallWhoseClientLeftKeepsItsPlaceForTheGraceOnly(t *testing.T) {
	t.Run("within the grace", func(t *testing.T) {
		s := startStopWatch(t, withSessions)
		g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: guardedSite(s.endpoint, "1h")})
		endpoint := g.URL + mcptest.MCPPath
		session := initSession(t, endpoint)

		leave(t, s, endpoint, wire.ToolCall("left-hang", "hang"), "hang", sessionCall(session))
		assert.Equal(t, "hang", within(t, s.stopped, "the cancellation"))
		_, body := post(t, endpoint, wire.ToolCall("next", "echo"), sessionCall(session))
		assert.Equal(t, "SERVER_BUSY", outcomeOf(body), "the upstream may still run the call")
	})
	t.Run("after the grace", func(t *testing.T) {
		s := startStopWatch(t, withSessions)
		g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: guardedSite(s.endpoint, "200ms")})
		endpoint := g.URL + mcptest.MCPPath
		session := initSession(t, endpoint)

		leave(t, s, endpoint, wire.ToolCall("left-hang", "hang"), "hang", sessionCall(session))
		assert.Equal(t, "hang", within(t, s.stopped, "the cancellation"))
		placesFree(t, g.AdminURL)
		_, body := post(t, endpoint, wire.ToolCall("next", "echo"), sessionCall(session))
		assert.Equal(t, "done", outcomeOf(body))
		assert.Equal(t, "hang", within(t, s.closed, "the gateway cut the call after the grace"))
	})
}

// The stop watch sees every cut of a call that was not answered, in
// whichever order the request's context and its handler end. Found in a
// run on a loaded machine: the SDK's handler woke on Done and returned
// before the context ran its AfterFuncs, and the cut went unseen.
func TestAStopWatchSeesACutWhateverEndsFirst(t *testing.T) {
	for _, tc := range []struct {
		name          string
		answered      bool
		afterFuncsRun bool // before the handler returns
		cuts          int
	}{
		{name: "the handler returns before the AfterFuncs run", cuts: 1},
		{name: "the AfterFuncs run before the handler returns", afterFuncsRun: true, cuts: 1},
		{name: "an answered call", answered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &lateContext{Context: context.Background(), done: make(chan struct{})}
			rec := &answerWatch{ResponseWriter: httptest.NewRecorder()}
			cuts := make(chan string, 2)
			handlerReturned := rec.watchCut(ctx, func() { cuts <- "cut" })
			if tc.answered {
				_, _ = rec.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
			}
			close(ctx.done) // the gateway closed the request
			seen := 0
			if tc.afterFuncsRun {
				ctx.runAfterFuncs()
				within(t, cuts, "the cut")
				seen++
			}
			handlerReturned()
			ctx.runAfterFuncs()
			assert.Equal(t, tc.cuts, seen+len(cuts))
		})
	}
}

// lateContext is a request's context whose Done is closed by its test,
// and whose AfterFuncs run only when the test says, as a busy machine may
// run those of a context.WithCancel well after it closed its Done.
type lateContext struct {
	context.Context
	done  chan struct{}
	mu    sync.Mutex
	after []*lateFunc
}

// lateFunc is an AfterFunc of a lateContext; settled once it ran, or was
// stopped.
type lateFunc struct {
	f       func()
	settled bool
}

func (c *lateContext) Done() <-chan struct{} { return c.done }

func (c *lateContext) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// AfterFunc is the method context.AfterFunc uses for a context that has
// one.
func (c *lateContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := &lateFunc{f: f}
	c.after = append(c.after, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := !a.settled
		a.settled = true
		return stopped
	}
}

// runAfterFuncs runs the AfterFuncs neither run nor stopped.
func (c *lateContext) runAfterFuncs() {
	c.mu.Lock()
	var run []func()
	for _, a := range c.after {
		if !a.settled {
			a.settled = true
			run = append(run, a.f)
		}
	}
	c.mu.Unlock()
	for _, f := range run {
		f()
	}
}

// A stream whose events carry ids may be resumed: its client leaving is no
// cancellation, and the call goes on for it to come back to. The place
// still comes back after the grace.
func TestAClientThatLeavesAResumableStreamDoesNotCancel(t *testing.T) {
	s := startStopWatch(t, resumableStreams)
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: guardedSite(s.endpoint, "200ms")})
	endpoint := g.URL + mcptest.MCPPath
	resp, _ := post(t, endpoint, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, session)
	version := withHeader("Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-11-25")
	resp, _ = post(t, endpoint, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, version)
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	// The client leaves once it has the stream's first event, whose id
	// lets it resume, as the SDK clients do.
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := open(endpoint, wire.ToolCall("left-stop", "stop"), version, withContext(ctx))
	require.NoError(t, err)
	var first strings.Builder
	for br := bufio.NewReader(resp.Body); !strings.HasSuffix(first.String(), "\n\n"); {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		first.WriteString(line)
	}
	assert.Contains(t, first.String(), "\nid:", "the stream's first event carries an id")
	require.Equal(t, "stop", within(t, s.started, "the call begin"))
	cancel()
	resp.Body.Close()
	placesFree(t, g.AdminURL)
	_, canceled := s.ids()
	assert.Empty(t, canceled, "notifications/cancelled sent for a stream the client may resume")
	select {
	case name := <-s.stopped:
		t.Fatalf("%s was stopped", name)
	default:
	}
}

// From MCP 2026-07-28 on, closing the stream is the cancellation: the
// gateway closes the upstream's at once, and holds the place for the grace,
// since servers (the Go SDK's among them) may run the call on.
func TestAClientThatLeavesUnder2026ClosesTheUpstreamStream(t *testing.T) {
	for _, tc := range []struct {
		grace string
		then  string
	}{
		{"1h", "SERVER_BUSY"},
		{"200ms", "done"},
	} {
		t.Run("cancel_grace "+tc.grace, func(t *testing.T) {
			s := startStopWatch(t, stateless)
			g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: guardedSite(s.endpoint, tc.grace)})
			endpoint := g.URL + mcptest.MCPPath
			body, version := statelessCall("left-hang", "hang")
			leave(t, s, endpoint, body, "hang", version)
			assert.Equal(t, "hang", within(t, s.closed, "the stream closed"))
			if tc.then == "done" {
				placesFree(t, g.AdminURL)
			}
			body, version = statelessCall("next", "echo")
			_, answer := post(t, endpoint, body, version)
			assert.Equal(t, tc.then, outcomeOf(answer))
			_, canceled := s.ids()
			assert.Empty(t, canceled, "no notifications/cancelled in the stateless era")
		})
	}
}

// Only calls that reached the upstream are cancelled there: calls whose
// deadline passed while they waited for the place are cut before they go
// upstream, and the upstream is told nothing of them. Found by an
// attacker's review: 30 calls cut at their deadline sent 30 cancellations
// for the 4 calls the upstream ever got.
func TestOnlyCallsThatReachedTheUpstreamAreCancelled(t *testing.T) {
	s := startStopWatch(t, withSessions)
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\ttimeout hang 200ms\n\t}\n\tconcurrency {\n\t\tmax 1\n\t\tqueue 8\n\t\tqueue_timeout 1m\n\t}\n}\n"+mcptest.ProxyTo(s.endpoint))
	endpoint := g.URL + mcptest.MCPPath
	session := initSession(t, endpoint)

	const calls = 8
	var wg sync.WaitGroup
	outcomes := make(chan string, calls)
	for i := range calls {
		wg.Go(func() {
			_, body := post(t, endpoint, wire.ToolCall(fmt.Sprint("cut-", i), "hang"), sessionCall(session))
			outcomes <- outcomeOf(body)
		})
	}
	wg.Wait()
	close(outcomes)
	for o := range outcomes {
		assert.Equal(t, "TIMEOUT", o)
	}
	// A cancellation is sent once its call's TIMEOUT is: wait for one for
	// each call the upstream received, and none for any other.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		called, canceled := s.ids()
		require.NotEmpty(c, called)
		require.Subset(c, called, canceled, "cancellations of calls the upstream never received")
		require.ElementsMatch(c, called, canceled)
	}, 10*time.Second, 10*time.Millisecond)
}

// faultyUpstream is a real listener that misbehaves on demand, by tool:
// answer answers at once; slow answers in an event after a few
// milliseconds; hang never answers; error answers 500 with a page; cut
// breaks its event stream halfway; endless sends progress events until
// its client leaves; linger answers in an event, and keeps its stream open
// until its client leaves. Notifications get 202, and cancellations are
// counted.
func faultyUpstream(t *testing.T) (addr string, cancels *atomic.Int64) {
	t.Helper()
	cancels = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if len(msg.ID) == 0 {
			if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
				cancels.Add(1)
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, msg.ID)
		flush := http.NewResponseController(w).Flush
		switch msg.Params.Name {
		case "answer":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, result)
		case "slow":
			w.Header().Set("Content-Type", "text/event-stream")
			_ = flush()
			select {
			case <-time.After(5 * time.Millisecond):
				_, _ = io.WriteString(w, "event: message\ndata: "+result+"\n\n")
			case <-r.Context().Done():
			}
		case "hang":
			<-r.Context().Done()
		case "linger":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+result+"\n\n")
			_ = flush()
			<-r.Context().Done()
		case "error":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "<html>down</html>")
		case "cut":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":")
			_ = flush()
			panic(http.ErrAbortHandler)
		case "endless":
			w.Header().Set("Content-Type", "text/event-stream")
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for {
				_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
				_ = flush()
				select {
				case <-tick.C:
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return strings.TrimPrefix(srv.URL, "http://"), cancels
}

// requestGoroutines counts the goroutines serving a request in the
// gateway's handler.
func requestGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "caddy-mcp/handler.(*Handler).ServeHTTP")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Thousands of calls that go wrong every way a client and an upstream can
// (clients that leave at once, later, or reset their connection; upstreams
// that hang, fail, break their stream or never end it) leave the guard as
// they found it, and no request behind.
func TestPlacesComeBackAfterThousandsOfFaultyCalls(t *testing.T) {
	up, _ := faultyUpstream(t)
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: "mcp {\n\tconcurrency {\n\t\tmax 8\n\t\tqueue 16\n\t\tqueue_timeout 1s\n\t\tcancel_grace 100ms\n\t}\n}\nreverse_proxy " + up})
	endpoint := g.URL + mcptest.MCPPath
	addr := strings.TrimPrefix(g.URL, "http://")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	const calls, clients = 2000, 16
	tools := []string{"answer", "slow", "hang", "error", "cut", "endless"}
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := next.Add(1); i <= calls; i = next.Add(1) {
				tool := tools[rng.IntN(len(tools))]
				body := wire.ToolCall(fmt.Sprint("faulty-", i), tool)
				switch leaving := rng.IntN(3); {
				case leaving == 0 && tool != "hang" && tool != "endless":
					// Waits for the whole answer.
					_, _, _ = send(endpoint, body, withClient(client))
				case leaving <= 1:
					// Leaves after a while.
					ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(20))*time.Millisecond)
					_, _, _ = send(endpoint, body, withClient(client), withContext(ctx))
					cancel()
				default:
					// Sends the call and resets the connection.
					if conn, err := net.Dial("tcp", addr); err == nil {
						_, _ = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
						if tc, ok := conn.(*net.TCPConn); ok {
							_ = tc.SetLinger(0)
						}
						_ = conn.Close()
					}
				}
			}
		})
	}
	wg.Wait()
	placesFree(t, g.AdminURL)
	waitStatus(t, g.AdminURL, func(s gatewayStatus) bool { return s.Handlers[0].Features.Concurrency.Queued == 0 })
	require.Eventually(t, func() bool { return requestGoroutines() == 0 }, 10*time.Second, 10*time.Millisecond, "requests still in the handler")
	// All eight places are free: eight calls held at once are admitted.
	results := make(chan string, 8)
	for i := range 8 {
		postAsync(t, endpoint, wire.ToolCall(fmt.Sprint("after-", i), "answer"), into(results))
	}
	for range 8 {
		assert.Equal(t, "done", receive(t, results))
	}
}

// A client that leaves once it has its answer cancels nothing: the
// upstream's work is over, and the places are free at once, however long
// the upstream keeps its stream open. Found in a test run: the Go SDK
// client closes a stream once it has read its response, and the gateway
// cancelled calls that had been answered.
func TestAClientThatLeavesOnceAnsweredCancelsNothing(t *testing.T) {
	up, cancels := faultyUpstream(t)
	// A grace of an hour: the place can only come back as answered.
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tcancel_grace 1h\n\t}\n}\nreverse_proxy " + up})
	endpoint := g.URL + mcptest.MCPPath

	ctx, cancel := context.WithCancel(t.Context())
	resp, err := open(endpoint, wire.ToolCall("answered", "linger"), withContext(ctx))
	require.NoError(t, err)
	var event strings.Builder
	for br := bufio.NewReader(resp.Body); !strings.HasSuffix(event.String(), "\n\n"); {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		event.WriteString(line)
	}
	assert.Contains(t, event.String(), `"id":"answered"`)
	cancel()
	resp.Body.Close()
	placesFree(t, g.AdminURL)
	assert.Zero(t, cancels.Load(), "notifications/cancelled for an answered call")
}

// With sessions pinned to replicas, the cancellation of a call whose
// client left goes on the call's session to the replica that holds it,
// whichever replica the pool's fallback would pick.
func TestTheCancellationReachesTheReplicaThatHoldsTheSession(t *testing.T) {
	started, stopped := make(chan string, 4), make(chan string, 4)
	end := make(chan struct{})
	var hostports []string
	for _, name := range []string{"a", "b"} {
		server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
		mcp.AddTool(server, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			started <- name
			select {
			case <-ctx.Done():
				stopped <- name
			case <-end:
			}
			return nil, nil, errors.New("stopped")
		})
		hostports = append(hostports, serveReplica(t, name, server, nil).hostport)
	}
	t.Cleanup(func() { close(end) }) // before the replicas stop: a call left running ends
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true,
		Site: poolSite(sessionsOn+"\nconcurrency {\n\tmax 4\n\tcancel_grace 1h\n}", hostports, mcpSessionLB)})
	endpoint := g.URL + mcptest.MCPPath

	for range 2 {
		// Sessions go to the replicas in turn: both are tried.
		_, token, pinned, _ := openSession(t, endpoint, "")
		ctx, cancel := context.WithCancel(t.Context())
		left := postAsync(t, endpoint, wire.ToolCall("left", "wait"), withContext(ctx),
			withHeader("Mcp-Session-Id", token, "MCP-Protocol-Version", "2025-11-25"))
		require.Equal(t, pinned, within(t, started, "the call begin"))
		cancel()
		<-left
		assert.Equal(t, pinned, within(t, stopped, "the cancellation"), "the replica that holds the session")
		placesFree(t, g.AdminURL)
	}
}
