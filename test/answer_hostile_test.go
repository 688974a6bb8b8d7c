package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Shapes of answer an official client takes for a request's response that
// the gateway once did not hold to what its features promise (found by an
// attacker's review): a response on the standalone stream, lines ended by
// a lone CR, events of a type one client reads as a message and another
// does not, a response after one a client refuses, a stream whose last
// byte is a CR. Each test shows the bytes the client takes.

// reviewServer is an MCP server that answers each request with the bytes
// its test writes (answer), and serves the standalone GET stream, on which
// the test may write too (toStandalone), once a client opened it
// (standaloneOpen).
type reviewServer struct {
	answer         func(s *reviewServer, w http.ResponseWriter, r *http.Request, req scriptedRequest)
	standaloneOpen chan struct{}
	toStandalone   chan string
	// calls receives the id of each tools/call or tools/list received.
	calls chan json.RawMessage
}

// startReviewServer serves a reviewServer on a free loopback port and
// returns it and its endpoint.
func startReviewServer(t *testing.T, answer func(s *reviewServer, w http.ResponseWriter, r *http.Request, req scriptedRequest)) (*reviewServer, string) {
	s := &reviewServer{answer: answer, standaloneOpen: make(chan struct{}, 4), toStandalone: make(chan string, 4), calls: make(chan json.RawMessage, 4)}
	return s, mcptest.ServeMCP(t, s)
}

func (s *reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.standalone(w, r)
		return
	case http.MethodPost:
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req scriptedRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case req.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", upstreamSession)
		writeAnswer(w, shape{}, req.ID, fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"review","version":"0"}}`, req.Params.ProtocolVersion))
	case req.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case req.Method == "tools/call" || req.Method == "tools/list":
		s.calls <- req.ID
		s.answer(s, w, r, req)
	case req.Method == "ping":
		s.answer(s, w, r, req)
	default:
		writeAnswer(w, shape{}, req.ID, `{}`)
	}
}

// standalone serves the standalone GET stream: what the test sends to
// toStandalone is written on it as it comes, until the client leaves.
func (s *reviewServer) standalone(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flush := http.NewResponseController(w).Flush
	if flush() != nil {
		return
	}
	s.standaloneOpen <- struct{}{}
	for {
		select {
		case b := <-s.toStandalone:
			if _, err := io.WriteString(w, b); err != nil || flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// streamHeader begins an event-stream answer, sent at once.
func streamHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
}

// holdOpen keeps an answer open until the gateway leaves it.
func holdOpen(r *http.Request) { <-r.Context().Done() }

// await waits for ch, at most 10 seconds, in the server's handler: ok
// false when it did not come (the test then fails on what its client took).
func await[T any](ch <-chan T) (v T, ok bool) {
	select {
	case v = <-ch:
		return v, true
	case <-time.After(10 * time.Second):
		return v, false
	}
}

// bigResponse is a call's response for id whose text is n bytes.
func bigResponse(id json.RawMessage, n int) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", n) + `"}],"isError":false}}`
}

// hiddenList is a tools/list response for id that lists the tool the
// policy hides.
func hiddenList(id json.RawMessage) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + scriptedTools + `}`
}

// messageEvent is data as a message event.
func messageEvent(data string) string { return "event: message\ndata: " + data + "\n\n" }

// reviewBudget is the budget the tests hold results to, and resultSize
// the result the server writes, three times over it.
const (
	reviewBudget = 100 << 10
	resultSize   = 300 << 10
)

// goSession connects the official Go SDK client to endpoint.
func goSession(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "review", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// goCall calls the tool "any" with the Go client, and returns the text it
// takes for the result.
func goCall(t *testing.T, session *mcp.ClientSession) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "any", Arguments: map[string]any{}})
	require.NoError(t, err)
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String()
}

// goTools lists the tools with the Go client, and returns their names.
func goTools(t *testing.T, session *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := session.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// assertWithinBudget holds the text a client took for the result to the
// budget: RESULT_TOO_LARGE, or a result that fits.
func assertWithinBudget(t *testing.T, text string) {
	t.Helper()
	assert.LessOrEqual(t, len(text), reviewBudget, "the client took a result of %d bytes past its budget of %d (envelope code %q)", len(text), reviewBudget, resultCode(text))
}

// A server sends a call's response on the standalone GET stream (which
// both SDK clients open after initialize), keeping the call's own stream
// open. Both official clients match a response against every request they
// have pending, whatever stream carried it: on a GET's stream, where
// nothing says which call a response answers, every response is held to
// the strictest budget. (A response sent on the stream of another POST,
// a ping's, is not: docs/security.md says so.)
func TestACallsResponseOnTheStandaloneStreamIsHeldToTheStrictestBudget(t *testing.T) {
	onStandalone := func(s *reviewServer, w http.ResponseWriter, r *http.Request, req scriptedRequest) {
		streamHeader(w)
		if _, ok := await(s.standaloneOpen); ok {
			s.toStandalone <- messageEvent(bigResponse(req.ID, resultSize))
		}
		holdOpen(r)
	}
	// Nothing on the standalone stream says which call, and so which
	// tool, a response answers: it is held to the strictest budget, and
	// refused as a JSON-RPC error (its request may be no call).
	t.Run("standalone stream, TypeScript client", func(t *testing.T) {
		_, upstream := startReviewServer(t, onStandalone)
		endpoint := holdResults(t, upstream, "max 100KiB")
		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
			{Op: "callTool", Name: "any", Arguments: map[string]any{}, TimeoutMS: 20000},
		}})
		require.Len(t, out.Results, 1)
		r := out.Results[0]
		require.False(t, r.OK, "no result: %.300s", r.Result)
		assert.Equal(t, "McpError", r.Error.Type)
		assert.Contains(t, string(r.Error.Data), "RESULT_TOO_LARGE")
	})
	t.Run("standalone stream, Go client", func(t *testing.T) {
		_, upstream := startReviewServer(t, onStandalone)
		endpoint := holdResults(t, upstream, "max 100KiB")
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := goSession(t, endpoint).CallTool(ctx, &mcp.CallToolParams{Name: "any", Arguments: map[string]any{}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "sent on a resumed stream is too large")
	})
}

// The Go SDK client ends a line of an event stream at a line feed only; the
// gateway, as the SSE specification and the TypeScript client do, at a
// carriage return too. A server that writes its response with lone CRs in
// it would show the gateway a fragment, or events with no data, and the
// Go client the whole response (a CR is white space in JSON): where a
// feature fails closed, a lone CR stops the stream, and the call is
// answered with its words.
func TestTheGoClientGetsNoResultPastItsBudgetFromLinesEndedByCR(t *testing.T) {
	for name, body := range map[string]func(id json.RawMessage) string{
		// The gateway's data is `{"jsonrpc":"2.0",`; the lines after it
		// are fields no one knows.
		"CRs between members": func(id json.RawMessage) string {
			return "data: " + strings.Replace(strings.Replace(bigResponse(id, resultSize), `,"id"`, ",\r\"id\"", 1), `,"result"`, ",\r\"result\"", 1) + "\n\n"
		},
		// Each CR CR ends an event for the gateway, which passes each as
		// it comes: the result has no size bound at all (4 MiB here).
		"CR CR between content blocks": func(id json.RawMessage) string {
			var b strings.Builder
			b.WriteString(`data: {"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[` + "\r\r")
			for range 40 {
				b.WriteString(`{"type":"text","text":"` + strings.Repeat("x", 100<<10) + `"},` + "\r\r")
			}
			b.WriteString(`{"type":"text","text":"end"}],"isError":false}}` + "\n\n")
			return b.String()
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, upstream := startReviewServer(t, func(_ *reviewServer, w http.ResponseWriter, _ *http.Request, req scriptedRequest) {
				streamHeader(w)
				_, _ = io.WriteString(w, body(req.ID))
			})
			endpoint := holdResults(t, upstream, "max 100KiB")
			assertWithinBudget(t, goCall(t, goSession(t, endpoint)))
		})
	}
}

// Events of a type the TypeScript client does not read that the Go SDK
// client reads as message events: it trims the type's white space, ends
// lines at a line feed only (a line ended at a CR is part of a comment for
// it), and keeps a leading byte order mark (the first field's name is
// then no field it knows). The features read the data of events of every
// type.
var goOnlyMessageEvents = map[string]func(data string) string{
	"type with a trailing space": func(data string) string { return "event: message \ndata: " + data + "\n\n" },
	"type behind a CR":           func(data string) string { return ":\revent: other\ndata: " + data + "\n\n" },
	"byte order mark":            func(data string) string { return "\xef\xbb\xbfevent: other\ndata: " + data + "\n\n" },
}

// A tools/list answer in such an event is filtered: the Go client does not
// take the tool the policy hides.
func TestTheGoClientGetsNoHiddenToolFromAnEventOfAnotherType(t *testing.T) {
	for name, event := range goOnlyMessageEvents {
		t.Run(name, func(t *testing.T) {
			_, upstream := startReviewServer(t, func(_ *reviewServer, w http.ResponseWriter, _ *http.Request, req scriptedRequest) {
				streamHeader(w)
				_, _ = io.WriteString(w, event(hiddenList(req.ID)))
			})
			gw := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\n"+mcptest.ProxyTo(upstream))
			assert.NotContains(t, goTools(t, goSession(t, gw.URL+mcptest.MCPPath)), "admin_reset", "the client took the hidden tool")
		})
	}
}

// Under truncate, a result in such an event is cut to its budget, with its
// warning.
func TestTheGoClientGetsNoUncutResultFromAnEventOfAnotherType(t *testing.T) {
	for name, event := range goOnlyMessageEvents {
		t.Run(name, func(t *testing.T) {
			_, upstream := startReviewServer(t, func(_ *reviewServer, w http.ResponseWriter, _ *http.Request, req scriptedRequest) {
				streamHeader(w)
				_, _ = io.WriteString(w, event(bigResponse(req.ID, resultSize)))
			})
			endpoint := holdResults(t, upstream, "max 100KiB\n\t\ttruncate")
			assertWithinBudget(t, goCall(t, goSession(t, endpoint)))
		})
	}
}

// validate checks a call against the tools/list the client took, from
// such an event too. (A JSON answer followed by bytes that are no JSON,
// whose first value the Go client decodes, teaches it nothing: the
// gateway reads no answer two ways.)
func TestValidateLearnsTheListTheGoClientTakesFromAnEventOfAnotherType(t *testing.T) {
	shapes := map[string]func(w http.ResponseWriter, list string){}
	for name, event := range goOnlyMessageEvents {
		shapes[name] = func(w http.ResponseWriter, list string) {
			streamHeader(w)
			_, _ = io.WriteString(w, event(list))
		}
	}
	for name, write := range shapes {
		t.Run(name, func(t *testing.T) {
			_, upstream := startReviewServer(t, func(_ *reviewServer, w http.ResponseWriter, _ *http.Request, req scriptedRequest) {
				if req.Method == "tools/list" {
					write(w, hiddenList(req.ID))
					return
				}
				streamHeader(w)
				_, _ = io.WriteString(w, messageEvent(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[{"type":"text","text":"the server ran the call"}]}}`))
			})
			gw := mcptest.StartGateway(t, "mcp {\n\tvalidate\n}\n"+mcptest.ProxyTo(upstream))
			session := goSession(t, gw.URL+mcptest.MCPPath)
			require.Contains(t, goTools(t, session), "small", "the client took the list")
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "small", Arguments: map[string]any{"n": 50}})
			require.NoError(t, err)
			text := mcptest.TextOf(t, res)
			assert.Contains(t, text, "validation_error", "n is at most 9 in the schema the client took; the call went to the server: %q", text)
		})
	}
}

// A first response the gateway reads as the call's, and the TypeScript
// client refuses (its schema admits no member besides jsonrpc, id and
// result), then the call's result in an event that never ends. The
// TypeScript client waits for the second: the gateway holds it to the
// budget though the call was answered, stops reading it there, and
// answers RESULT_TOO_LARGE.
func TestAResponseAfterOneTheClientRefusesIsNotReadPastItsBudget(t *testing.T) {
	wrote := make(chan int, 1)
	_, upstream := startReviewServer(t, func(_ *reviewServer, w http.ResponseWriter, r *http.Request, req scriptedRequest) {
		streamHeader(w)
		head := messageEvent(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[]},"refused":true}`) +
			"event: message\ndata: " + `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":[{"type":"text","text":"`
		flush := http.NewResponseController(w).Flush
		_, err := io.WriteString(w, head)
		chunk := []byte(strings.Repeat("x", 64<<10))
		written := 0
		for err == nil && written < endlessCap {
			_, err = w.Write(chunk)
			if err == nil {
				err = flush()
			}
			written += len(chunk)
		}
		wrote <- written
	})
	endpoint := holdResults(t, upstream, "max 100KiB")
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
		{Op: "callTool", Name: "any", Arguments: map[string]any{}, TimeoutMS: 5000},
	}})
	require.Len(t, out.Results, 1)
	r := out.Results[0]
	assert.True(t, r.OK, "the client is answered: %v", r.Error)
	assert.Equal(t, "RESULT_TOO_LARGE", resultCode(r.Text()))
	written, ok := await(wrote)
	require.True(t, ok, "the server's answer ends")
	assert.Less(t, written, 32<<20, "what the server could write before the gateway stopped reading")
}

// A stream whose last event ends with a lone CR, the last byte the server
// writes. The TypeScript client's parser waits for the byte after a CR (it
// could be a CRLF's LF) and, the stream over, never dispatches the event:
// the gateway owes the response again when the stream ends there, and
// answers it with an envelope.
func TestTheTSClientIsAnsweredWhenTheLastEventEndsWithACR(t *testing.T) {
	_, upstream := startReviewServer(t, func(_ *reviewServer, w http.ResponseWriter, _ *http.Request, req scriptedRequest) {
		streamHeader(w)
		_, _ = io.WriteString(w, "event: message\ndata: "+bigResponse(req.ID, 10)+"\n\r")
	})
	endpoint := holdResults(t, upstream, "max 100KiB")
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
		{Op: "callTool", Name: "any", Arguments: map[string]any{}, TimeoutMS: 5000},
	}})
	require.Len(t, out.Results, 1)
	assert.True(t, out.Results[0].OK, "the client is answered: %v", out.Results[0].Error)
}
