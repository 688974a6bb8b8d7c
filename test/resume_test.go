package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A stream whose events carry ids breaks while it owes the response to a
// call: the gateway resumes it itself, with a GET and Last-Event-ID to the
// same upstream, and passes what the upstream replays into the client's
// stream; when the upstream cannot resume it, the client's stream ends
// with the envelope for the call. The servers here misbehave on demand
// (the official SDKs' servers, killed and restarted, are in killed_test.go):
// they break a stream after its first event, and answer each resume as
// the test says.

// resumeMode is how the resumable server answers a resuming GET.
type resumeMode int

const (
	// replays: the rest of the stream, the response, and its end.
	replays resumeMode = iota
	// lost: 404, as a server that restarted and lost the session.
	lost
	// breaksAgain: one more progress event with a new id, then a break,
	// every time.
	breaksAgain
	// endless: 200 with a JSON body that never ends, written until the
	// gateway stops reading it.
	endless
)

// resumableServer breaks each POST's stream after a progress event with
// id "e1" and half of the next event, and answers GETs as mode says.
type resumableServer struct {
	mode resumeMode
	// gets counts the resuming GETs; lastIDs are their Last-Event-IDs.
	gets atomic.Int32
	// abandoned is closed when the gateway stops reading an endless body.
	abandoned chan struct{}
	mu        sync.Mutex
	lastIDs   []string
	// callID is the id of the last call, which the replay answers.
	callID   json.RawMessage
	scripted scripted
}

func (s *resumableServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Mcp-Session-Id", upstreamSession)
	if r.Method == http.MethodGet {
		s.resume(w, r)
		return
	}
	var req scriptedRequest
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || req.Method != "tools/call" {
		// The rest of a session (initialize, the lists) as the scripted
		// server answers it.
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.scripted.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.callID = req.ID
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "id: e1\nevent: message\ndata: "+progress(1)+"\n\n")
	_, _ = io.WriteString(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"me")
	http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler) // the connection breaks: no end of the body
}

func (s *resumableServer) resume(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Last-Event-Id") == "" {
		w.WriteHeader(http.StatusMethodNotAllowed) // no standalone stream
		return
	}
	n := s.gets.Add(1)
	s.mu.Lock()
	s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-Id"))
	s.mu.Unlock()
	switch s.mode {
	case lost:
		http.Error(w, "session not found", http.StatusNotFound)
		return
	case breaksAgain:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprintf(w, "id: r%d\nevent: message\ndata: %s\n\n", n, progress(1+int(n)))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	case endless:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				close(s.abandoned)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "id: e2\nevent: message\ndata: "+progress(2)+"\n\n")
	s.mu.Lock()
	id := string(s.callID)
	s.mu.Unlock()
	_, _ = io.WriteString(w, "id: e3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n")
}

func progress(n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":%d,"total":3}}`, n)
}

// callStream posts a call of id 7 through the gateway, as a 2025-11-25
// client of a session, and returns the events of the stream it gets back,
// read to its end: each event's lines, joined.
func callStream(t *testing.T, endpoint string) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint,
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"work","arguments":{},"_meta":{"progressToken":"p"}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var events []string
	var event []string
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		if lines.Text() == "" {
			events = append(events, strings.Join(event, "\n"))
			event = nil
			continue
		}
		event = append(event, lines.Text())
	}
	require.NoError(t, lines.Err(), "the client's stream must end, not break")
	if len(event) > 0 {
		events = append(events, strings.Join(event, "\n"))
	}
	return events
}

func TestABrokenStreamTheServerReplaysReachesTheClientWhole(t *testing.T) {
	t.Run("passed as it comes", func(t *testing.T) {
		s := &resumableServer{mode: replays}
		gw := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(mcptest.ServeMCP(t, s)))
		events := callStream(t, gw.URL+mcptest.MCPPath)
		require.Len(t, events, 4, "%q", events)
		assert.Equal(t, "id: e1\nevent: message\ndata: "+progress(1), events[0])
		// The half event the break cut off is named so that clients drop
		// it: the upstream replays it whole.
		assert.Equal(t, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"me\nevent: mcp-gateway-discarded", events[1])
		assert.Equal(t, "id: e2\nevent: message\ndata: "+progress(2), events[2])
		assert.Contains(t, events[3], `"text":"done"`)
		assert.Equal(t, int32(1), s.gets.Load())
		assert.Equal(t, []string{"e1"}, s.lastIDs, "resumed after the last event the client had whole")
	})
	t.Run("held event by event for a budget", func(t *testing.T) {
		// An event is held whole while a hook reads it: the half one never
		// reached the client.
		s := &resumableServer{mode: replays}
		events := callStream(t, holdResults(t, mcptest.ServeMCP(t, s), "max 100KiB"))
		require.Len(t, events, 3, "%q", events)
		assert.Equal(t, "id: e1\nevent: message\ndata: "+progress(1), events[0])
		assert.Equal(t, "id: e2\nevent: message\ndata: "+progress(2), events[1])
		assert.Contains(t, events[2], `"text":"done"`)
		assert.Equal(t, []string{"e1"}, s.lastIDs)
	})
}

func TestABrokenStreamTheServerLostEndsWithTheEnvelope(t *testing.T) {
	s := &resumableServer{mode: lost}
	gw := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(mcptest.ServeMCP(t, s)))
	events := callStream(t, gw.URL+mcptest.MCPPath)
	require.Len(t, events, 3, "%q", events)
	env := envelopeOfEvent(t, events[2])
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
	assert.Equal(t, envelope.SeverityCritical, env.Severity)
	assert.Zero(t, env.RetryAfter, "a call that may have run carries no retry_after")
	assert.Equal(t, int32(1), s.gets.Load())
}

// A hostile server breaks every stream it resumes, after an event with a
// new id: the gateway resumes it maxResumes times (3), then answers.
func TestAServerThatBreaksEveryResumeIsResumedThreeTimes(t *testing.T) {
	s := &resumableServer{mode: breaksAgain}
	gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: "mcp\n" + mcptest.ProxyTo(mcptest.ServeMCP(t, s))})
	const streamed = `caddy_mcp_stream_resumes_total{outcome="streamed"}`
	before := mcpMetrics(t, gw.AdminURL)[streamed]
	events := callStream(t, gw.URL+mcptest.MCPPath)
	assert.Equal(t, int32(3), s.gets.Load())
	assert.Equal(t, []string{"e1", "r1", "r2"}, s.lastIDs)
	require.NotEmpty(t, events)
	env := envelopeOfEvent(t, events[len(events)-1])
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
	assert.Equal(t, envelope.SeverityCritical, env.Severity)
	assert.Equal(t, before+3, mcpMetrics(t, gw.AdminURL)[streamed])
}

// A hostile server answers the resuming GET with a body that never ends
// and is no event stream: the gateway stops reading it at once (no loop
// over its bytes, no memory for them), and the client's stream ends with
// the envelope.
func TestAResumeAnsweredWithAnEndlessBodyIsNotReadOn(t *testing.T) {
	s := &resumableServer{mode: endless, abandoned: make(chan struct{})}
	gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: "mcp\n" + mcptest.ProxyTo(mcptest.ServeMCP(t, s))})
	const refused = `caddy_mcp_stream_resumes_total{outcome="refused"}`
	before := mcpMetrics(t, gw.AdminURL)[refused]
	events := callStream(t, gw.URL+mcptest.MCPPath)
	env := envelopeOfEvent(t, events[len(events)-1])
	assert.Equal(t, envelope.SeverityCritical, env.Severity)
	assert.Equal(t, int32(1), s.gets.Load(), "no second resume after an answer that is no stream")
	<-s.abandoned
	assert.Equal(t, before+1, mcpMetrics(t, gw.AdminURL)[refused])
}

// envelopeOfEvent is the envelope in the result of an event's data.
func envelopeOfEvent(t *testing.T, event string) envelope.Parsed {
	t.Helper()
	_, data, ok := strings.Cut(event, "data: ")
	require.True(t, ok, "no data in %q", event)
	var msg struct {
		ID     int `json:"id"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(data), &msg))
	require.Equal(t, 7, msg.ID)
	require.True(t, msg.Result.IsError)
	require.Len(t, msg.Result.Content, 1)
	env, err := envelope.Parse(msg.Result.Content[0].Text)
	require.NoError(t, err)
	return env
}

// The official clients take the result the server replayed, through the
// stream the gateway resumed: they never see the break.
func TestTheClientsTakeTheResultOfAStreamTheGatewayResumed(t *testing.T) {
	for _, client := range mcptest.Clients {
		t.Run(client, func(t *testing.T) {
			s := &resumableServer{mode: replays}
			gw := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(mcptest.ServeMCP(t, s)))
			endpoint := gw.URL + mcptest.MCPPath
			var res *mcp.CallToolResult
			switch client {
			case "go":
				session, err := mcp.NewClient(&mcp.Implementation{Name: "resumed", Version: "0"}, nil).
					Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, nil)
				require.NoError(t, err)
				defer session.Close()
				res, err = session.CallTool(t.Context(), &mcp.CallToolParams{Name: "work"})
				require.NoError(t, err)
			case "ts":
				out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{mcptest.CallToolStep("work", nil)}})
				require.Len(t, out.Results, 1)
				require.True(t, out.Results[0].OK, "%v", out.Results[0].Error)
				res = out.Results[0].CallToolResult(t)
			}
			assert.False(t, res.IsError)
			assert.Equal(t, "done", mcptest.TextOf(t, res))
			assert.Equal(t, int32(1), s.gets.Load())
		})
	}
}
