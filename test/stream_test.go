package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// brokenStream is how a misbehaving upstream answers a tools/call of one
// tool: with text/event-stream, written in chunks as given, then ended.
// "$ID" in a chunk is the call's id as sent, "$TOKEN" its progress token.
type brokenStream struct {
	chunks []string
	// clean ends the chunked body properly (EOF); otherwise the connection
	// is closed in the middle of it, as a crashed server's would be.
	clean bool
	// release, when set, holds the upstream after the first chunk until it
	// is closed.
	release chan struct{}
}

// progressEvent is an SSE event carrying a progress notification.
const progressEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":$TOKEN,\"progress\":1,\"total\":3,\"message\":\"step 1/3\"}}\n\n"

// responseEvent is an SSE event carrying the call's answer.
const responseEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n"

// startStreamUpstream serves the demo MCP server, except for a tools/call of
// a tool named in streams, which gets that broken stream instead. It
// returns the endpoint URL.
func startStreamUpstream(t *testing.T, streams map[string]brokenStream) string {
	t.Helper()
	demo := demoserver.Handler()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	url := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		name, id, token := brokenCall(body)
		s, ok := streams[name]
		if !ok || r.Method != http.MethodPost {
			r.Body = io.NopCloser(bytes.NewReader(body))
			demo.ServeHTTP(w, r)
			return
		}
		wg.Add(1)
		defer wg.Done()
		writeBrokenStream(t, w, r, s, strings.NewReplacer("$ID", string(id), "$TOKEN", string(token)), stop)
	}))
	// Runs before the server is closed: an upstream still held is let go.
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	return url
}

// brokenCall finds the tools/call in a message or batch: its tool name, id
// and progress token ("p" when it has none).
func brokenCall(body []byte) (name string, id, token json.RawMessage) {
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	var msgs []msg
	if json.Unmarshal(body, &msgs) != nil {
		var m msg
		if json.Unmarshal(body, &m) != nil {
			return "", nil, nil
		}
		msgs = []msg{m}
	}
	for _, m := range msgs {
		if m.Method == "tools/call" {
			token = m.Params.Meta.ProgressToken
			if token == nil {
				token = json.RawMessage(`"p"`)
			}
			return m.Params.Name, m.ID, token
		}
	}
	return "", nil, nil
}

// writeBrokenStream writes s on the raw connection: HTTP/1.1 chunked, so
// that closing early is a broken body, not a short one.
func writeBrokenStream(t *testing.T, w http.ResponseWriter, r *http.Request, s brokenStream, ids *strings.Replacer, stop <-chan struct{}) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n")
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		fmt.Fprintf(rw, "Mcp-Session-Id: %s\r\n", sid)
	}
	fmt.Fprintf(rw, "\r\n")
	for i, c := range s.chunks {
		if i == 1 && s.release != nil {
			select {
			case <-s.release:
			case <-stop:
				return
			}
		}
		c = ids.Replace(c)
		fmt.Fprintf(rw, "%x\r\n%s\r\n", len(c), c)
		if rw.Flush() != nil {
			return
		}
	}
	if s.clean {
		fmt.Fprintf(rw, "0\r\n\r\n")
		_ = rw.Flush()
	}
	// A FIN, not a reset: what was written is delivered before the end.
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	event, data, id string
}

// parseSSE reads a whole event stream as a client does (the HTML standard's
// algorithm): an event is dispatched by a blank line; one cut short by the
// end of the stream is dropped.
func parseSSE(b []byte) []sseEvent {
	var events []sseEvent
	var cur sseEvent
	var data []string
	s := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(b))
	lines := strings.Split(s, "\n")
	// The last element is what follows the last line end: never a line.
	for _, line := range lines[:len(lines)-1] {
		if line == "" {
			if len(data) > 0 {
				cur.data = strings.Join(data, "\n")
				events = append(events, cur)
			}
			cur, data = sseEvent{id: cur.id}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.event = value
		case "data":
			data = append(data, value)
		case "id":
			cur.id = value
		}
	}
	return events
}

// postStream posts body through endpoint and reads the whole answer; a body
// cut short is returned with the error.
func postStream(t *testing.T, endpoint, body string, opts ...sendOption) (*http.Response, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, b, err := send(endpoint, body, append(slices.Clip(opts), withContext(ctx))...)
	require.NotNil(t, resp, "%v", err)
	require.NoError(t, ctx.Err(), "the stream did not end")
	return resp, b, err
}

// assertRepairEvent checks one SSE event injected by the gateway: a message
// event whose data is, on its own, the JSON-RPC answer for id carrying
// HANDOFF_UPSTREAM_UNAVAILABLE. call says which wire form it must have.
func assertRepairEvent(t *testing.T, ev sseEvent, id string, call bool) envelope.Parsed {
	t.Helper()
	assert.Equal(t, "message", ev.event)
	assert.NotContains(t, ev.data, "\n", "one data line")
	r := decodeReply(t, []byte(ev.data))
	assert.Equal(t, "2.0", r.JSONRPC)
	assert.Equal(t, id, string(r.ID), "the pending id, byte for byte")
	// The call reached the server: it may have run, and carries no
	// retry_after.
	want := wantEnvelope{code: envelope.HandoffUpstreamUnavailable, recovery: "may have run", critical: true}
	if !call {
		require.NotNil(t, r.Error, "another request gets a JSON-RPC error: %s", ev.data)
		assertRPCErrorCarries(t, r, want)
		env, err := envelope.Parse(r.Error.Data.Envelope)
		require.NoError(t, err)
		return env
	}
	assert.NotContains(t, r.Members, "error")
	env, err := envelope.ParseResult(r.Result)
	require.NoError(t, err, "%s", ev.data)
	assert.Contains(t, string(r.Result), `"isError":true`)
	assertEnvelope(t, env, want)
	return env
}

func replaceIDs(s string) string {
	return strings.NewReplacer("$ID", wire.ProgressCallID, "$TOKEN", wire.ProgressToken).Replace(s)
}

func TestBrokenStreamIsRepairedWithOneEventForThePendingCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream brokenStream
		// message is a phrase of the envelope's message.
		message string
	}{
		{"progress, then the connection breaks", brokenStream{chunks: []string{progressEvent}}, "broke"},
		{"progress, then a clean end without a response", brokenStream{chunks: []string{progressEvent}, clean: true}, "without responding"},
		{"nothing, then the connection breaks", brokenStream{chunks: []string{": keep-alive\n\n"}}, "broke"},
		{"an event for another id, then a break", brokenStream{chunks: []string{strings.Replace(responseEvent, "$ID", "8", 1)}}, "broke"},
		// MCP 2026-07-28 has no resumption: an event id does not make the
		// client reconnect, so the stream must be ended for it.
		{"2026-07-28: an event id, then a break", brokenStream{chunks: []string{"id: 42\n" + progressEvent}}, "broke"},
		// Before it, the gateway resumes the stream with Last-Event-ID;
		// this upstream cannot (resume_test.go has one that can).
		{"a priming event id, then a break", brokenStream{chunks: []string{"id: ev-1\ndata:\n\n", progressEvent}}, "broke"},
		{"an event id on a progress event, then a break", brokenStream{chunks: []string{"id: 42\n" + progressEvent}}, "broke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(startStreamUpstream(t, map[string]brokenStream{"broken": tc.stream}))).URL + mcptest.MCPPath
			var opts []sendOption
			if strings.HasPrefix(tc.name, "2026-07-28") {
				opts = append(opts, withHeader("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "broken"))
			}
			resp, body, err := postStream(t, endpoint, wire.ProgressCall("broken"), opts...)
			require.NoError(t, err, "the repaired stream ends cleanly; got %q", body)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			sent := replaceIDs(strings.Join(tc.stream.chunks, ""))
			require.True(t, bytes.HasPrefix(body, []byte(sent)), "the upstream's bytes come first, untouched: %q", body)
			added := parseSSE(body[len(sent):])
			require.Len(t, added, 1, "exactly one event is added: %q", body[len(sent):])
			assert.Equal(t, "event: message\ndata: "+added[0].data+"\n\n", string(body[len(sent):]), "nothing else is added")
			env := assertRepairEvent(t, added[0], "7", true)
			assert.Contains(t, env.Message, tc.message)
			if strings.Contains(tc.name, "progress, then the connection breaks") {
				t.Logf("repaired stream (case a), as the client received it:\n%q", body)
			}
		})
	}
}

func TestResumableOrAnsweredStreamIsNotRepaired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream brokenStream
	}{
		{"a priming event id, then a clean end", brokenStream{chunks: []string{"id: ev-1\ndata:\n\n", progressEvent}, clean: true}},
		{"the response, then a break", brokenStream{chunks: []string{progressEvent, responseEvent}}},
		{"the response with CR LF line ends, then a break", brokenStream{chunks: []string{strings.ReplaceAll(responseEvent, "\n", "\r\n")}}},
		{"the response in pieces, then a break", brokenStream{chunks: []string{responseEvent[:20], responseEvent[20:60], responseEvent[60:]}}},
		{"the response, then a clean end", brokenStream{chunks: []string{responseEvent}, clean: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(startStreamUpstream(t, map[string]brokenStream{"broken": tc.stream}))).URL + mcptest.MCPPath
			resp, body, err := postStream(t, endpoint, wire.ProgressCall("broken"))
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, replaceIDs(strings.Join(tc.stream.chunks, "")), string(body), "the upstream's bytes and nothing else")
			if tc.stream.clean {
				assert.NoError(t, err, "a clean end stays clean")
			} else {
				assert.Error(t, err, "a broken stream that is not repaired is aborted, as reverse_proxy does")
			}
		})
	}
}

func TestBrokenBatchStreamIsRepairedForTheUnansweredRequestOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answered is the id the upstream answers before breaking.
		answered, pending string
		pendingIsCall     bool
	}{
		{"the call is answered, the list is not", `"call-1"`, `2`, false},
		{"the list is answered, the call is not", `2`, `"call-1"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + tc.answered + ",\"result\":{}}\n\n"
			stream := brokenStream{chunks: []string{answer}}
			endpoint := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(startStreamUpstream(t, map[string]brokenStream{"broken": stream}))).URL + mcptest.MCPPath
			batch := `[{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"broken"}},` +
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},` +
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`
			_, body, err := postStream(t, endpoint, batch)
			require.NoError(t, err, "%q", body)
			require.True(t, bytes.HasPrefix(body, []byte(answer)), "%q", body)
			added := parseSSE(body[len(answer):])
			require.Len(t, added, 1, "one event, for the unanswered request only: %q", body[len(answer):])
			assertRepairEvent(t, added[0], tc.pending, tc.pendingIsCall)
		})
	}
}

// halfEvent is a progress event cut in the middle of its data line.
const halfEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progr"

func TestStreamBrokenMidEventIsRepairedWithAReadableEvent(t *testing.T) {
	stream := brokenStream{chunks: []string{progressEvent, halfEvent}}
	endpoint := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(startStreamUpstream(t, map[string]brokenStream{"broken": stream}))).URL + mcptest.MCPPath
	_, body, err := postStream(t, endpoint, wire.ProgressCall("broken"))
	require.NoError(t, err, "%q", body)
	t.Logf("stream broken mid-event, as the client received it:\n%q", body)
	sent := replaceIDs(progressEvent + halfEvent)
	require.True(t, bytes.HasPrefix(body, []byte(sent)), "%q", body)

	events := parseSSE(body)
	require.NotEmpty(t, events)
	last := events[len(events)-1]
	assertRepairEvent(t, last, "7", true)
	// What a client reads as messages must all be JSON: the Go SDK client
	// ends the whole session on a message event it cannot decode.
	for i, ev := range events {
		if ev.event == "" || ev.event == "message" {
			assert.True(t, json.Valid([]byte(ev.data)), "message event %d is not JSON, a client cannot read it: %q", i, ev.data)
		}
	}
}

// brokenTools are the tools the SDK client tests call on a broken upstream.
var brokenTools = map[string]brokenStream{
	"break_after_progress": {chunks: []string{progressEvent}},
	"break_mid_event":      {chunks: []string{progressEvent, halfEvent}},
}

func TestGoClientGetsTheRepairedStreamAsAToolResult(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(startStreamUpstream(t, brokenTools)))
	for _, tool := range []string{"break_after_progress", "break_mid_event"} {
		t.Run(tool, func(t *testing.T) {
			progress := make(chan float64, 10)
			c := mcp.NewClient(&mcp.Implementation{Name: "caddy-mcp-test", Version: "0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params.Progress
				},
			})
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + mcptest.MCPPath, HTTPClient: &http.Client{}}, nil)
			require.NoError(t, err)
			defer cs.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Meta: mcp.Meta{"progressToken": "p"}})
			require.NoError(t, err, "the repaired call must come back as a result")
			assert.True(t, res.IsError)
			env, err := envelope.Parse(mcptest.TextOf(t, res))
			require.NoError(t, err)
			assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
			assert.Contains(t, env.Recovery, "may have run")
			assert.Equal(t, envelope.SeverityCritical, env.Severity)
			assert.False(t, env.HasRetryAfter(), "the call reached the server: no retry_after")
			select {
			case p := <-progress:
				assert.Equal(t, float64(1), p, "the progress sent before the break arrived")
			case <-ctx.Done():
				t.Error("the progress sent before the break never arrived")
			}

			tools, err := cs.ListTools(ctx, nil)
			require.NoError(t, err, "the session survives the repaired call")
			assert.Len(t, tools.Tools, 4)
		})
	}
}

func TestTypeScriptClientGetsTheRepairedStreamInsteadOfTimingOut(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(startStreamUpstream(t, brokenTools)))
	step := func(tool string) mcptest.TSStep {
		s := mcptest.CallToolStep(tool, map[string]any{})
		s.Progress = true
		s.TimeoutMS = 5000
		return s
	}
	out := mcptest.RunTSClient(t, mcptest.TSScript{
		URL:     g.URL + mcptest.MCPPath,
		Timeout: 60 * time.Second,
		Steps:   []mcptest.TSStep{step("break_after_progress"), step("break_mid_event"), mcptest.ListToolsStep()},
	})
	require.Len(t, out.Results, 3)
	for i, tool := range []string{"break_after_progress", "break_mid_event"} {
		t.Run(tool, func(t *testing.T) {
			r := out.Results[i]
			require.True(t, r.OK, "the repaired call must return a result, not throw or time out: %v", r.Error)
			res := r.CallToolResult(t)
			assert.True(t, res.IsError)
			env, err := envelope.Parse(mcptest.TextOf(t, res))
			require.NoError(t, err)
			assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
			assert.Contains(t, env.Recovery, "may have run")
			if assert.Len(t, r.Progress, 1, "the progress sent before the break arrived") {
				assert.Equal(t, float64(1), r.Progress[0].Progress)
			}
		})
	}
	assert.True(t, out.Results[2].OK, "the session survives: %v", out.Results[2].Error)
	for _, e := range out.TransportErrors {
		t.Logf("TypeScript client transport error: %v", &e)
	}
}

// firstEventDelay posts a call of "held" to endpoint, whose upstream writes
// one event and then waits for release: it returns how long the first event
// took to arrive, then releases the upstream and checks the rest.
func firstEventDelay(t *testing.T, endpoint string, release chan struct{}) time.Duration {
	t.Helper()
	start := time.Now()
	resp, err := open(endpoint, wire.ProgressCall("held"), withContext(t.Context()))
	require.NoError(t, err)
	defer resp.Body.Close()

	type first struct {
		event string
		err   error
		after time.Duration
	}
	got := make(chan first, 1)
	br := bufio.NewReader(resp.Body)
	go func() {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			ev.WriteString(line)
			if err != nil || line == "\n" {
				got <- first{ev.String(), err, time.Since(start)}
				return
			}
		}
	}()
	var f first
	select {
	case f = <-got:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the first event did not arrive while the upstream held the rest: it was buffered")
	}
	require.NoError(t, f.err)
	assert.Equal(t, replaceIDs(progressEvent), f.event)

	close(release)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, replaceIDs(responseEvent), string(rest), "the response follows, and nothing else")
	return f.after
}

func TestFirstEventReachesTheClientBeforeTheUpstreamFinishes(t *testing.T) {
	held := func() (map[string]brokenStream, chan struct{}) {
		release := make(chan struct{})
		return map[string]brokenStream{"held": {chunks: []string{progressEvent, responseEvent}, clean: true, release: release}}, release
	}
	streams, release := held()
	direct := firstEventDelay(t, startStreamUpstream(t, streams), release)

	streams, release = held()
	g := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(startStreamUpstream(t, streams)))
	gateway := firstEventDelay(t, g.URL+mcptest.MCPPath, release)
	t.Logf("time to first event: direct %v, through the gateway %v", direct, gateway)
}

// initSession opens a session with the MCP server behind endpoint over raw
// HTTP and returns its id.
func initSession(t *testing.T, endpoint string) string {
	t.Helper()
	resp, body := post(t, endpoint, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	session := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, session)
	resp, body = post(t, endpoint, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, withHeader("Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-06-18"))
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
	return session
}

// TestAnsweredStreamIsNotRepairedWhateverTheIDSpelling: the Go SDK server
// decodes a request's id and writes it again in its own spelling; the
// response still answers the request, and nothing may be added after it.
func TestAnsweredStreamIsNotRepairedWhateverTheIDSpelling(t *testing.T) {
	endpoint := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(mcptest.StartDemoServer(t))).URL + mcptest.MCPPath
	session := initSession(t, endpoint)
	for _, id := range []string{`"plain"`, `"caf\u00e9"`, `"a\/b"`, `"caf` + "\u00e9" + `"`, `17`} {
		t.Run(id, func(t *testing.T) {
			resp, body := post(t, endpoint, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, withHeader("Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-06-18"))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			events := parseSSE(body)
			require.NotEmpty(t, events, "%q", body)
			assert.Len(t, events, 1, "the server's response and nothing added: %q", body)
			assert.NotContains(t, string(body), "HANDOFF_UPSTREAM_UNAVAILABLE")
			var r struct {
				ID json.RawMessage `json:"id"`
			}
			require.NoError(t, json.Unmarshal([]byte(events[0].data), &r))
			t.Logf("request id %s, the server answered id %s", id, r.ID)
		})
	}
}
