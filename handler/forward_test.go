package handler

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/answer/answertest"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// answering is a next handler that answers with status, headers and body,
// the body in the writes given.
func answering(status int, hdr map[string]string, writes ...string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		for _, p := range writes {
			if _, err := io.WriteString(w, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// eventStream are the headers of an SSE answer.
var eventStream = map[string]string{"Content-Type": "text/event-stream", "Mcp-Session-Id": "sess-1"}

// serveErr is serve for a handler that may return an error.
func serveErr(t *testing.T, h *Handler, r *http.Request, next caddyhttp.Handler) (*httptest.ResponseRecorder, error) {
	t.Helper()
	w := httptest.NewRecorder()
	return w, h.ServeHTTP(w, r, next)
}

const (
	notification = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	listOne      = `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`
)

func TestUpstreamErrorAnswersArePassedOrReplaced(t *testing.T) {
	rpcError := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}`
	html := "<html><body><h1>502 Bad Gateway</h1>\n<p>nginx</p></body></html>"
	upstreamHeaders := map[string]string{
		"Content-Type": "text/html", "Content-Language": "en", "Etag": `"abc"`, "Last-Modified": "Sat, 01 Jan 2000 00:00:00 GMT",
		"Mcp-Session-Id": "sess-1", "X-Upstream": "kept",
	}
	tests := []struct {
		name   string
		body   string
		status int
		hdr    map[string]string
		writes []string
		// passed: the client gets the upstream's answer as it is; else it
		// gets code, with HTTP status wantStatus.
		passed     bool
		code       envelope.Code
		wantStatus int
	}{
		{name: "a JSON-RPC error on a 500 passes untouched", body: callOne, status: 500,
			hdr: map[string]string{"Content-Type": "application/json"}, writes: []string{rpcError}, passed: true},
		{name: "a JSON-RPC error written in pieces passes untouched", body: callOne, status: 503,
			hdr: map[string]string{"Content-Type": "application/json"}, writes: []string{rpcError[:10], rpcError[10:30], rpcError[30:]}, passed: true},
		{name: "a batch of JSON-RPC errors passes untouched", body: callOne, status: 500,
			writes: []string{"[" + rpcError + "," + rpcError + "]"}, passed: true},
		{name: "an HTML 500 is replaced", body: callOne, status: 500, hdr: upstreamHeaders, writes: []string{"<html>oops</html>"},
			code: envelope.InternalError, wantStatus: http.StatusOK},
		{name: "an HTML 502 is replaced", body: callOne, status: 502, hdr: upstreamHeaders, writes: []string{html},
			code: envelope.HandoffUpstreamUnavailable, wantStatus: http.StatusOK},
		{name: "an empty 504 is replaced", body: callOne, status: 504,
			code: envelope.Timeout, wantStatus: http.StatusOK},
		{name: "a plain-text 429 is replaced", body: callOne, status: 429, hdr: map[string]string{"Retry-After": "7"}, writes: []string{"slow down"},
			code: envelope.RateLimited, wantStatus: http.StatusOK},
		{name: "JSON that is not JSON-RPC is replaced", body: callOne, status: 500, writes: []string{`{"error":"boom"}`},
			code: envelope.InternalError, wantStatus: http.StatusOK},
		{name: "an HTML 500 to a notification is an id-less answer with its status", body: notification, status: 500, writes: []string{html},
			code: envelope.InternalError, wantStatus: http.StatusInternalServerError},
		{name: "a compressed error body passes as it is", body: callOne, status: 500,
			hdr: map[string]string{"Content-Type": "text/html", "Content-Encoding": "gzip"}, writes: []string{"\x1f\x8b\x08\x00binary"}, passed: true},
		{name: "an event stream with an error status passes", body: callOne, status: 500,
			hdr: eventStream, writes: []string{"data: x\n\n"}, passed: true},
		{name: "a 401 passes, for OAuth discovery", body: callOne, status: 401,
			hdr: map[string]string{"Www-Authenticate": `Bearer resource_metadata="x"`}, writes: []string{"unauthorized"}, passed: true},
		{name: "a 404 passes: the session expired", body: callOne, status: 404, writes: []string{"not found"}, passed: true},
		{name: "a 202 passes", body: notification, status: 202, passed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			w, err := serveErr(t, h, post(tt.body), answering(tt.status, tt.hdr, tt.writes...))
			require.NoError(t, err)
			res := w.Result()
			if tt.passed {
				assert.Equal(t, tt.status, w.Code)
				assert.Equal(t, strings.Join(tt.writes, ""), w.Body.String(), "byte for byte")
				for k, v := range tt.hdr {
					assert.Equal(t, v, res.Header.Get(k), k)
				}
				return
			}
			assert.Equal(t, tt.wantStatus, w.Code)
			assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
			assert.Equal(t, w.Body.Len(), int(res.ContentLength), "Content-Length is the envelope's")
			for _, k := range []string{"Content-Encoding", "Content-Language", "Etag", "Last-Modified"} {
				assert.Empty(t, res.Header.Get(k), "%s described the upstream's body, not the envelope", k)
			}
			for k, v := range tt.hdr {
				if k == "Mcp-Session-Id" || k == "X-Upstream" {
					assert.Equal(t, v, res.Header.Get(k), "%s is kept", k)
				}
			}
			m := members(t, w.Body.Bytes())
			if tt.wantStatus != http.StatusOK {
				assert.NotContains(t, m, "id")
				assert.Equal(t, string(tt.code), decodeRPCError(t, m["error"]).Data.Code)
				return
			}
			assert.Equal(t, "1", string(m["id"]))
			env, isError := toolError(t, m["result"])
			assert.True(t, isError)
			assert.Equal(t, tt.code, env.Code)
		})
	}
}

func TestReplacedErrorPageKeepsAnExcerptAndTheRetryAfter(t *testing.T) {
	h := provision(t, &Handler{})
	next := answering(http.StatusServiceUnavailable, map[string]string{"Retry-After": "12", "Content-Type": "text/plain"}, "  overloaded,\n  try later ")
	w, err := serveErr(t, h, post(listOne), next)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "12", w.Header().Get("Retry-After"), "the upstream's delay is the envelope's")
	e := decodeRPCError(t, members(t, w.Body.Bytes())["error"])
	assert.Equal(t, "The MCP server is busy: it answered 503 Service Unavailable", e.Message)
	require.NotNil(t, e.Data.RetryAfter)
	assert.Equal(t, 12.0, *e.Data.RetryAfter)

	next = answering(http.StatusInternalServerError, map[string]string{"Retry-After": "99"}, "  Traceback:\n\tKeyError  ")
	w, err = serveErr(t, h, post(callOne), next)
	require.NoError(t, err)
	assert.Empty(t, w.Header().Get("Retry-After"), "a 500 has no delay; the upstream's header is not kept")
	env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
	assert.Contains(t, env.Details, envelope.Detail{Key: "upstream_body", Value: "Traceback: KeyError"})
}

func TestHeldErrorBodiesOverTheBound(t *testing.T) {
	jsonish := "[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}},`, 2000)
	require.Greater(t, len(jsonish), answer.MaxHeldBody)
	page := "<html>" + strings.Repeat("<p>stack frame</p>\n", 6000) + "</html>"
	require.Greater(t, len(page), answer.MaxHeldBody)
	chunks := func(s string, n int) []string {
		var out []string
		for len(s) > n {
			out = append(out, s[:n])
			s = s[n:]
		}
		return append(out, s)
	}
	t.Run("a long body that starts like JSON is released as it is", func(t *testing.T) {
		h := provision(t, &Handler{})
		w, err := serveErr(t, h, post(callOne), answering(500, map[string]string{"Content-Type": "application/json"}, chunks(jsonish, 16<<10)...))
		require.NoError(t, err)
		assert.Equal(t, 500, w.Code)
		assert.Equal(t, jsonish, w.Body.String())
	})
	t.Run("a long error page is replaced, with an excerpt of its start", func(t *testing.T) {
		h := provision(t, &Handler{})
		w, err := serveErr(t, h, post(callOne), answering(500, map[string]string{"Content-Type": "text/html"}, chunks(page, 16<<10)...))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, w.Code)
		env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
		assert.Equal(t, envelope.InternalError, env.Code)
		require.Len(t, env.Details, 2)
		assert.True(t, strings.HasPrefix(env.Details[1].Value, "<html><p>stack frame</p> <p>stack frame</p>"), env.Details[1].Value)
		assert.True(t, strings.HasSuffix(env.Details[1].Value, "..."))
	})
	t.Run("a long error page written at once is replaced too", func(t *testing.T) {
		h := provision(t, &Handler{})
		w, err := serveErr(t, h, post(callOne), answering(500, map[string]string{"Content-Type": "text/html"}, page))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, w.Code)
		env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
		assert.Equal(t, envelope.InternalError, env.Code)
	})
}

func TestFlushWhileAnErrorIsHeldSendsNothing(t *testing.T) {
	h := provision(t, &Handler{})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
		return http.NewResponseController(w).Flush()
	})
	w, err := serveErr(t, h, post(notification), next)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadGateway, w.Code, "no 200 went out before the handler decided")
	assert.Equal(t, string(envelope.HandoffUpstreamUnavailable), decodeRPCError(t, members(t, w.Body.Bytes())["error"]).Data.Code)
}

func TestProxyErrorBeforeAnyWriteIsAnsweredWithItsEnvelope(t *testing.T) {
	dial := caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(errors.New("connect: connection refused")))
	tests := []struct {
		name       string
		body       string
		err        error
		wantStatus int
		code       envelope.Code
	}{
		{"a call to an upstream that refused the connection", callOne, dial, http.StatusOK, envelope.HandoffUpstreamUnavailable},
		{"a request to an upstream that timed out", listOne, caddyhttp.Error(http.StatusGatewayTimeout, errors.New("timeout")), http.StatusOK, envelope.Timeout},
		{"a notification gets the id-less form and the status", notification, dial, http.StatusBadGateway, envelope.HandoffUpstreamUnavailable},
		{"a notification to no healthy upstream", notification, caddyhttp.Error(http.StatusServiceUnavailable, errors.New("no upstreams")), http.StatusBadGateway, envelope.HandoffUpstreamUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return tt.err })
			w, err := serveErr(t, h, post(tt.body), next)
			require.NoError(t, err, "the gateway answered: nothing is left for Caddy's error handling")
			assert.Equal(t, tt.wantStatus, w.Code)
			m := members(t, w.Body.Bytes())
			if tt.wantStatus == http.StatusOK {
				require.Contains(t, m, "id")
				code := ""
				if res, ok := m["result"]; ok {
					env, _ := toolError(t, res)
					code = string(env.Code)
				} else {
					code = decodeRPCError(t, m["error"]).Data.Code
				}
				assert.Equal(t, string(tt.code), code)
				return
			}
			assert.Equal(t, string(tt.code), decodeRPCError(t, m["error"]).Data.Code)
		})
	}
}

func TestProxyErrorsTheGatewayDoesNotOwnAreReturned(t *testing.T) {
	internal := caddyhttp.Error(http.StatusInternalServerError, errors.New("a bug in a handler"))
	t.Run("an error that is not the upstream's", func(t *testing.T) {
		h := provision(t, &Handler{})
		w, err := serveErr(t, h, post(callOne), caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return internal }))
		assert.Equal(t, internal, err)
		assert.Zero(t, w.Body.Len())
	})
	t.Run("an error after the answer started", func(t *testing.T) {
		h := provision(t, &Handler{})
		dial := caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(errors.New("refused")))
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0",`)
			return dial
		})
		w, err := serveErr(t, h, post(callOne), next)
		assert.Equal(t, dial, err)
		assert.Equal(t, `{"jsonrpc":"2.0",`, w.Body.String(), "nothing is written after the upstream's bytes")
	})
}

// clientMessages are the message events a client reads in body.
func clientMessages(t *testing.T, body []byte) []string {
	t.Helper()
	events, _ := sseClient(body)
	return messagesOf(events)
}

func TestEventStreamEndingBeforeItsResponseIsRepaired(t *testing.T) {
	progressEvent := "event: message\ndata: " + progress + "\n\n"
	tests := []struct {
		name     string
		body     string
		hdr      map[string]string
		status   int
		writes   []string
		repaired bool
		// what is the repair's account of how the stream ended.
		what string
		// stateless: the request declares MCP 2026-07-28.
		stateless bool
	}{
		{name: "a stream ending without the response", body: callOne, hdr: eventStream, writes: []string{progressEvent},
			repaired: true, what: "the MCP server ended its answer without responding"},
		{name: "a stream ending mid-event", body: callOne, hdr: eventStream, writes: []string{progressEvent, "data: " + resultOne[:15]},
			repaired: true, what: "the MCP server ended its answer without responding"},
		{name: "a stream carrying the response", body: callOne, hdr: eventStream, writes: []string{progressEvent, "data: " + resultOne + "\n\n"}},
		{name: "a stream that carried an event id is left to the client's reconnect", body: callOne, hdr: eventStream,
			writes: []string{"id: 1\n" + progressEvent}},
		{name: "in MCP 2026-07-28 an event id resumes nothing: the stream is repaired", body: callOne, hdr: eventStream, stateless: true,
			writes: []string{"id: 1\n" + progressEvent}, repaired: true, what: "the MCP server ended its answer without responding"},
		{name: "a compressed stream is not followed", body: callOne,
			hdr: map[string]string{"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}, writes: []string{"\x1f\x8b"}},
		{name: "a stream under another success status is followed as a 200's", body: callOne, status: http.StatusCreated, hdr: eventStream,
			writes: []string{progressEvent}, repaired: true, what: "the MCP server ended its answer without responding"},
		{name: "a stream answering only notifications owes nothing", body: notification, hdr: eventStream, writes: []string{progressEvent}},
		{name: "a JSON answer is not a stream", body: callOne, hdr: map[string]string{"Content-Type": "application/json"}, writes: []string{`{"jsonrpc":"2.0"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			status := tt.status
			if status == 0 {
				status = http.StatusOK
			}
			r := post(tt.body)
			if tt.stateless {
				r = post(tt.body, header("Mcp-Protocol-Version", "2026-07-28"), header("Mcp-Method", "tools/call"), header("Mcp-Name", "search"))
			}
			w, err := serveErr(t, h, r, answering(status, tt.hdr, tt.writes...))
			require.NoError(t, err)
			upstreamBytes := strings.Join(tt.writes, "")
			require.True(t, strings.HasPrefix(w.Body.String(), upstreamBytes), "the upstream's bytes pass first, untouched")
			added := w.Body.String()[len(upstreamBytes):]
			if !tt.repaired {
				assert.Empty(t, added)
				return
			}
			assert.True(t, w.Flushed, "the repair is flushed")
			msgs := clientMessages(t, w.Body.Bytes())
			require.NotEmpty(t, msgs)
			m := members(t, []byte(msgs[len(msgs)-1]))
			assert.Equal(t, "1", string(m["id"]))
			env, isError := toolError(t, m["result"])
			assert.True(t, isError)
			assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
			assert.Equal(t, "The MCP server did not finish answering: "+tt.what+" before the response to this request", env.Message)
		})
	}
}

func TestEventStreamReadFromIsFollowed(t *testing.T) {
	h := provision(t, &Handler{})
	stream := "data: " + progress + "\n\n"
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rf, ok := w.(io.ReaderFrom)
		require.True(t, ok, "reverse_proxy copies with ReadFrom when it can")
		_, err := rf.ReadFrom(strings.NewReader(stream))
		return err
	})
	w, err := serveErr(t, h, post(callOne), next)
	require.NoError(t, err)
	assert.Len(t, clientMessages(t, w.Body.Bytes()), 2, "the progress, then the repair: %q", w.Body)
}

// abortAfter is a next handler that streams writes, then panics with v, as
// reverse_proxy does when the upstream breaks an answer it started.
func abortAfter(v any, writes ...string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, p := range writes {
			_, _ = io.WriteString(w, p)
			_ = http.NewResponseController(w).Flush()
		}
		panic(v)
	})
}

func TestBrokenEventStreamIsSettledByARepairEvent(t *testing.T) {
	h := provision(t, &Handler{})
	upstreamBytes := "data: " + progress + "\n\ndata: {\"jsonrpc\""
	w := httptest.NewRecorder()
	var err error
	require.NotPanics(t, func() { err = h.ServeHTTP(w, post(callOne), abortAfter(http.ErrAbortHandler, upstreamBytes)) })
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(w.Body.String(), upstreamBytes))
	events, lastID := sseClient(w.Body.Bytes())
	assert.Empty(t, lastID)
	msgs := messagesOf(events)
	require.Len(t, msgs, 2, "the progress and the repair; the cut event is dropped: %q", w.Body)
	assert.Equal(t, progress, msgs[0])
	env, _ := toolError(t, members(t, []byte(msgs[1]))["result"])
	assert.Equal(t, "The MCP server did not finish answering: the connection to the MCP server broke before the response to this request", env.Message)
	assert.Zero(t, env.RetryAfter, "the call reached the server: no retry_after")
	assert.Equal(t, envelope.SeverityCritical, env.Severity, "the call may have run")
}

func TestPanicsTheGatewayCannotSettleAreReraised(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		v      any
		writes []string
	}{
		{"another panic, mid-stream", boom, []string{"data: " + progress + "\n\n"}},
		{"an abort once the response was sent", http.ErrAbortHandler, []string{"data: " + resultOne + "\n\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			w := httptest.NewRecorder()
			assert.PanicsWithValue(t, tt.v, func() { _ = h.ServeHTTP(w, post(callOne), abortAfter(tt.v, tt.writes...)) })
			assert.Equal(t, strings.Join(tt.writes, ""), w.Body.String(), "nothing is added")
		})
	}
}

func TestNothingMoreIsWrittenToAClientThatLeft(t *testing.T) {
	cut := "data: " + progress + "\n\n"
	leave := func(cancel context.CancelFunc, then caddyhttp.Handler) caddyhttp.Handler {
		return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			cancel()
			return then.ServeHTTP(w, r)
		})
	}
	tests := []struct {
		name    string
		next    caddyhttp.Handler
		written string
		panics  bool
		err     error
	}{
		{name: "a stream that ends without its response", next: answering(200, eventStream, cut), written: cut},
		{name: "a stream that breaks", next: abortAfter(http.ErrAbortHandler, cut), written: cut, panics: true},
		{name: "a held error page", next: answering(500, map[string]string{"Content-Type": "text/html"}, "<html>")},
		{name: "a proxy error", next: caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return errUnreachable }), err: errUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			r := post(callOne)
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			r = r.WithContext(ctx)
			w := httptest.NewRecorder()
			serveIt := func() { assert.Equal(t, tt.err, h.ServeHTTP(w, r, leave(cancel, tt.next))) }
			if tt.panics {
				assert.PanicsWithValue(t, http.ErrAbortHandler, serveIt, "net/http ends the connection quietly")
			} else {
				serveIt()
			}
			assert.Equal(t, tt.written, w.Body.String())
		})
	}
}

var errUnreachable = caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(errors.New("refused")))

// reachUpstream is what the proxy's transport does once it has written
// the request to the upstream: it tells the request's trace.
func reachUpstream(r *http.Request) {
	if trace := httptrace.ContextClientTrace(r.Context()); trace != nil {
		trace.WroteHeaders()
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
}

// isCancellation reports whether r is a notifications/cancelled the
// gateway sends itself, and answers it as a server does.
func isCancellation(w http.ResponseWriter, r *http.Request) bool {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// A client that leaves a call holding places, before MCP 2026-07-28: the
// upstream is told to stop it, and its answer is read to its end, into
// nothing, the places held meanwhile (answer.Abandonment). With an upstream said to
// stop when its stream closes, a 2026-07-28 call is cut with its client.
func TestAClientThatLeavesIsDrainedWhileItHoldsPlaces(t *testing.T) {
	events := []string{"data: " + progress + "\n\n", "data: " + progress + "\n\n", "data: " + resultOne + "\n\n"}
	tests := []struct {
		name    string
		version string
		// cancels: the upstream is said to stop a call whose stream closes.
		cancels bool
		drained bool
	}{
		{"no protocol version", "", false, true},
		{"2025-06-18", "2025-06-18", false, true},
		{"2025-11-25, even with an upstream that cancels", "2025-11-25", true, true},
		{"2026-07-28 with an upstream that cancels", "2026-07-28", true, false},
		{"a later version too", "2027-01-01", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, CancelGrace: caddy.Duration(time.Hour)}), UpstreamCancelsOnClose: tt.cancels})
			r := post(callOne, header("Mcp-Protocol-Version", tt.version), header("Mcp-Method", "tools/call"), header("Mcp-Name", "search"))
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			r = r.WithContext(ctx)
			client := &brokenClient{Hdr: http.Header{}}
			cancelled := make(chan struct{}, 1)
			var writeErrs []error
			var upstreamCtxErr, flushErr error
			var active int
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, ur *http.Request) error {
				if isCancellation(w, ur) {
					cancelled <- struct{}{}
					return nil
				}
				reachUpstream(ur)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				for i, e := range events {
					_, err := io.WriteString(w, e)
					writeErrs = append(writeErrs, err)
					if err != nil {
						return err
					}
					if i == 0 {
						cancel() // the client is gone
						if tt.drained {
							<-cancelled
						}
					}
				}
				flushErr = http.NewResponseController(w).Flush()
				upstreamCtxErr = ur.Context().Err()
				active = guardOf(h).Places().Totals().Active
				return nil
			})
			err := h.ServeHTTP(client, r, next)
			writes, flushes := client.Counts()
			assert.Zero(t, guardOf(h).Places().Totals().Active, "the places come back once the handler returns")
			if tt.drained {
				assert.NoError(t, err)
				assert.Equal(t, []error{nil, nil, nil}, writeErrs, "the proxy reads the upstream to its end")
				assert.NoError(t, flushErr)
				assert.NoError(t, upstreamCtxErr, "the upstream request outlives the client's")
				assert.Equal(t, 1, active, "the places are held while the upstream answers")
				assert.Equal(t, 1, writes, "after the first failed write nothing more is sent")
				assert.Zero(t, flushes)
				return
			}
			assert.ErrorIs(t, err, errBrokenPipe)
			require.Len(t, writeErrs, 1)
			assert.ErrorIs(t, writeErrs[0], errBrokenPipe, "the proxy learns the client is gone, and stops")
			assert.Empty(t, cancelled, "no notifications/cancelled in the stateless era")
		})
	}
}

// From MCP 2026-07-28, closing the stream is the cancellation: a client
// that leaves has the upstream request cut at once, and, since servers do
// not all stop then, its places are held for cancel_grace after the
// handler returned.
func TestAClientThatLeavesUnder2026IsCutAndItsPlacesHeldForTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 3 * time.Second
		h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, CancelGrace: caddy.Duration(grace)})})
		r := post(callOne, header("Mcp-Protocol-Version", "2026-07-28"), header("Mcp-Method", "tools/call"), header("Mcp-Name", "search"))
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		r = r.WithContext(ctx)
		var upstreamCtxErr error
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, ur *http.Request) error {
			if isCancellation(w, ur) {
				t.Error("a notifications/cancelled in the stateless era")
				return nil
			}
			reachUpstream(ur)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+progress+"\n\n")
			cancel() // the client is gone
			<-ur.Context().Done()
			upstreamCtxErr = context.Cause(ur.Context())
			return nil // as reverse_proxy does for a canceled request
		})
		_, err := serveErr(t, h, r, next)
		require.NoError(t, err)
		assert.ErrorIs(t, upstreamCtxErr, answer.ErrClientLeft, "the upstream request is cut with its client")
		assert.Equal(t, 1, guardOf(h).Places().Totals().Active, "the place is held while the upstream may run the call")
		time.Sleep(grace - time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, 1, guardOf(h).Places().Totals().Active, "within the grace")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Zero(t, guardOf(h).Places().Totals().Active, "the place comes back after the grace")
	})
}

func TestADrainedAnswerIsDroppedOnceTheClientLeft(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1, CancelGrace: caddy.Duration(time.Hour)})})
	r := post(callOne, header("Mcp-Protocol-Version", "2025-06-18"))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	r = r.WithContext(ctx)
	first := "data: " + progress + "\n\n"
	cancelled := make(chan struct{}, 1)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, ur *http.Request) error {
		if isCancellation(w, ur) {
			cancelled <- struct{}{}
			return nil
		}
		reachUpstream(ur)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, first)
		cancel()
		<-cancelled
		for range 3 {
			n, err := io.WriteString(w, "data: "+progress+"\n\n")
			require.NoError(t, err)
			require.Equal(t, len("data: "+progress+"\n\n"), n)
		}
		assert.NoError(t, ur.Context().Err())
		return nil
	})
	w, err := serveErr(t, h, r, next)
	require.NoError(t, err)
	assert.Equal(t, first, w.Body.String(), "what came after the client left went nowhere, and no repair either")
}

func TestIdleAnswerStreamGetsKeepaliveComments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := provision(t, &Handler{SSEKeepalive: caddy.Duration(10 * time.Second)})
		w := answertest.NewLockedRecorder()
		first := "data: " + progress + "\n\n"
		var during string
		next := caddyhttp.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) error {
			rw.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(rw, first)
			time.Sleep(35 * time.Second)
			during = w.Body()
			_, err := io.WriteString(rw, "data: "+resultOne+"\n\n")
			return err
		})
		require.NoError(t, h.ServeHTTP(w, post(callOne), next))
		assert.Equal(t, first+":\n:\n", during, "a comment at 20s and 30s: the write at 0s kept the stream busy until the tick at 10s")
		assert.Equal(t, []string{progress, resultOne}, clientMessages(t, []byte(w.Body())), "comments change no event")
		time.Sleep(time.Minute)
		assert.Equal(t, first+":\n:\n"+"data: "+resultOne+"\n\n", w.Body(), "nothing is written once the answer is over")
	})
}

func TestKeepaliveOffLeavesTheStreamAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := provision(t, &Handler{SSEKeepalive: caddy.Duration(-1)})
		next := caddyhttp.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) error {
			rw.Header().Set("Content-Type", "text/event-stream")
			time.Sleep(time.Hour)
			_, err := io.WriteString(rw, "data: "+resultOne+"\n\n")
			return err
		})
		w, err := serveErr(t, h, post(callOne), next)
		require.NoError(t, err)
		assert.Equal(t, "data: "+resultOne+"\n\n", w.Body.String())
	})
}

// statusLog is a response writer that keeps every status written, 1xx
// included.
type statusLog struct {
	hdr      http.Header
	statuses []int
	body     strings.Builder
}

func (s *statusLog) Header() http.Header         { return s.hdr }
func (s *statusLog) WriteHeader(code int)        { s.statuses = append(s.statuses, code) }
func (s *statusLog) Write(p []byte) (int, error) { return s.body.Write(p) }

func TestInformationalStatusesPassBeforeTheFinalOne(t *testing.T) {
	h := provision(t, &Handler{})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.WriteHeader(http.StatusInternalServerError)
		_, err := io.WriteString(w, "<html>boom</html>")
		return err
	})
	w := &statusLog{hdr: http.Header{}}
	require.NoError(t, h.ServeHTTP(w, post(callOne), next))
	assert.Equal(t, []int{http.StatusEarlyHints, http.StatusOK}, w.statuses, "103 passes; the 500 is held, then replaced")
	env, _ := toolError(t, members(t, []byte(w.body.String()))["result"])
	assert.Equal(t, envelope.InternalError, env.Code)
}

func TestWhatCountsAsJSONRPCOrAStream(t *testing.T) {
	for body, want := range map[string]bool{
		"":                    true,
		"  \r\n\t{":           true,
		"[":                   true,
		"<html>":              false,
		" x{":                 false,
		"\xef\xbb\xbf{":       false,
		`"a string"`:          false,
		"123":                 false,
		"\n\n\n\n\n\n\n\n\n[": true,
	} {
		assert.Equal(t, want, jsonrpc.StartsMessage([]byte(body)), "StartsMessage(%q)", body)
	}
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`: true,
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"x":1}]`:            true,
		`{"jsonrpc":"2.0","method":"notifications/message"}`:        true,
		`{"error":"boom"}`:                    false,
		`[]`:                                  false,
		`[1,2]`:                               false,
		`{"jsonrpc":"2.0","id":1,"result":{}`: false,
		``:                                    false,
	} {
		assert.Equal(t, want, isJSONRPC([]byte(body)), "isJSONRPC(%q)", body)
	}
	for ct, want := range map[string]bool{
		"text/event-stream":                true,
		"Text/Event-Stream; charset=utf-8": true,
		" text/event-stream ":              true,
		"application/json":                 false,
		"text/event-streams":               false,
		"":                                 false,
	} {
		assert.Equal(t, want, answer.IsEventStream(http.Header{"Content-Type": {ct}}), "answer.IsEventStream(%q)", ct)
	}
}
