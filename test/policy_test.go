package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The tool policy in front of a stateful Go SDK server: hidden tools are
// absent from tools/list and answered UNKNOWN_ACTION without reaching the
// server; a deprecated tool's result carries a DEPRECATED warning on the
// success path; a call past its deadline is answered TIMEOUT, and the
// server is told to stop it.

const policySite = `mcp {
	tools {
		deny admin_* *delete*
		deprecate old_search "Use search_v2 instead" search_v2
		timeout slow_* 700ms
	}
}
`

// policyServer is what the server saw: the tools that ran, the calls whose
// context ended before they finished, and the requestIds of the
// notifications/cancelled it received.
type policyServer struct {
	mu        sync.Mutex
	ran       []string
	callIDs   map[string]string // the JSON-RPC id of each tool's last call
	started   chan string       // the slow tools, as they start
	cancelled chan string
	notified  chan string
	// takeCancellation delays taking a notifications/cancelled (nil: none).
	takeCancellation chan struct{}
}

func (p *policyServer) callID(tool string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.callIDs[tool]
}

func (p *policyServer) record(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ran = append(p.ran, name)
}

func (p *policyServer) hasRun(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.ran, name)
}

type queryArgs struct {
	Query string `json:"query"`
}

func startPolicyServer(t *testing.T) (*policyServer, string) {
	p := &policyServer{callIDs: map[string]string{}, started: make(chan string, 16), cancelled: make(chan string, 16), notified: make(chan string, 16)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "policy", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	for _, name := range []string{"search_docs", "search_v2", "old_search", "admin_reset", "purge_delete_all"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "The " + name + " tool."}, func(ctx context.Context, req *mcp.CallToolRequest, in queryArgs) (*mcp.CallToolResult, any, error) {
			p.record(name)
			return text(name + " found " + in.Query), nil, nil
		})
	}
	slow := func(ctx context.Context, req *mcp.CallToolRequest, in queryArgs) (*mcp.CallToolResult, any, error) {
		p.record(req.Params.Name)
		p.started <- req.Params.Name
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 10, Message: "working"})
		}
		select {
		case <-ctx.Done():
			p.cancelled <- req.Params.Name
			return nil, nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return text("finally"), nil, nil
		}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "failing"}, func(context.Context, *mcp.CallToolRequest, queryArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the index is offline"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow_report"}, slow)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow_progress"}, slow)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	url := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name      string          `json:"name"`
					RequestID json.RawMessage `json:"requestId"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil {
				switch msg.Method {
				case "tools/call":
					p.mu.Lock()
					p.callIDs[msg.Params.Name] = string(msg.ID)
					p.mu.Unlock()
				case "notifications/cancelled":
					if p.takeCancellation != nil {
						<-p.takeCancellation
					}
					p.notified <- string(msg.Params.RequestID)
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	return p, url
}

// within waits for a value on c, failing the test after a while.
func within(t *testing.T, c chan string, what string) string {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("the server never saw %s", what)
		return ""
	}
}

func TestToolPolicyWithTheGoClient(t *testing.T) {
	p, upstream := startPolicyServer(t)
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Site: policySite + mcptest.ProxyTo(upstream), Admin: true})
	before := mcpMetrics(t, g.AdminURL)
	var progress []string
	var progressMu sync.Mutex
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "policy-go", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progressMu.Lock()
			defer progressMu.Unlock()
			progress = append(progress, req.Params.Message)
		},
	}).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, nil)
	require.NoError(t, err)
	defer cs.Close()

	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Name == "old_search" {
			assert.Equal(t, "DEPRECATED: Use search_v2 instead. The old_search tool.", tool.Description)
		}
	}
	assert.ElementsMatch(t, []string{"search_docs", "search_v2", "old_search", "failing", "slow_report", "slow_progress"}, names)

	t.Run("a hidden tool does not exist", func(t *testing.T) {
		for _, tool := range []string{"admin_reset", "purge_delete_all"} {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
			require.NoError(t, err, "a result, not an error")
			require.True(t, res.IsError)
			text := mcptest.TextOf(t, res)
			assert.Contains(t, text, `<tool_error code="UNKNOWN_ACTION" severity="error">`)
			assert.Contains(t, text, "does not exist on this MCP server")
			assert.Contains(t, text, "<available_actions>", "the nearest names it may call instead")
			assert.NotContains(t, text, "<action>admin_", "no hidden name among the suggestions")
			assert.NotContains(t, text, "<action>purge_")
			assert.False(t, p.hasRun(tool), "the server never saw the call")
		}
	})

	t.Run("a deprecated tool warns on the success path", func(t *testing.T) {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "old_search", Arguments: map[string]any{"query": "q"}})
		require.NoError(t, err)
		assert.False(t, res.IsError)
		require.Len(t, res.Content, 2)
		assert.Equal(t, "old_search found q", res.Content[0].(*mcp.TextContent).Text)
		warning := res.Content[1].(*mcp.TextContent).Text
		assert.Equal(t, `<tool_error code="DEPRECATED" severity="warning">
<message>The tool "old_search" is deprecated: Use search_v2 instead</message>
<recovery>This call succeeded, and its result above is valid. Use search_v2 for the next calls instead.</recovery>
<available_actions>
  <action>search_v2</action>
</available_actions>
</tool_error>`, warning)
		parsed, err := envelope.Parse(warning)
		require.NoError(t, err)
		assert.Equal(t, envelope.SeverityWarning, parsed.Severity)
		assert.Nil(t, res.StructuredContent)

		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_docs", Arguments: map[string]any{"query": "q"}})
		require.NoError(t, err)
		assert.Equal(t, "search_docs found q", mcptest.TextOf(t, res), "other tools untouched")
	})

	t.Run("a slow tool is cut at its deadline", func(t *testing.T) {
		start := time.Now()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow_report", Arguments: map[string]any{"query": "q"}})
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 10*time.Second)
		require.True(t, res.IsError)
		text := mcptest.TextOf(t, res)
		assert.Contains(t, text, `<tool_error code="TIMEOUT" severity="error">`)
		assert.Contains(t, text, `did not answer within 700ms`)
		assert.Contains(t, text, "check its effect before retrying")
		assert.Equal(t, "slow_report", within(t, p.cancelled, "the call cancelled"))
		assert.Equal(t, p.callID("slow_report"), within(t, p.notified, "notifications/cancelled"), "the cancelled request's id")
	})

	t.Run("a streamed call that sent progress ends with the envelope", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "slow_progress", Arguments: map[string]any{"query": "q"}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(t.Context(), params)
		require.NoError(t, err)
		require.True(t, res.IsError)
		assert.Contains(t, mcptest.TextOf(t, res), `code="TIMEOUT"`)
		progressMu.Lock()
		assert.Equal(t, []string{"working"}, progress)
		progressMu.Unlock()
		assert.Equal(t, "slow_progress", within(t, p.cancelled, "the call cancelled"))
		within(t, p.notified, "notifications/cancelled")
	})

	// The session lives on: the next call works.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_v2", Arguments: map[string]any{"query": "z"}})
	require.NoError(t, err)
	assert.Equal(t, "search_v2 found z", mcptest.TextOf(t, res))

	// A tool that fails is no success.
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "failing", Arguments: map[string]any{"query": "z"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	// A call is counted once its answer is sent: the last may still be
	// on its way to the counter.
	want := map[string]float64{
		`caddy_mcp_tool_calls_total{outcome="denied"}`:   2,
		`caddy_mcp_tool_calls_total{outcome="success"}`:  3,
		`caddy_mcp_tool_calls_total{outcome="timeout"}`:  2,
		`caddy_mcp_tool_calls_total{outcome="is_error"}`: 1,
		`caddy_mcp_deprecated_calls_total{}`:             1,
		`caddy_mcp_tools_hidden_total{}`:                 2,
	}
	var got map[string]float64
	assert.Eventually(t, func() bool {
		got = toolMetrics(delta(before, mcpMetrics(t, g.AdminURL)))
		return assert.ObjectsAreEqual(want, got)
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, want, got)
}

// toolMetrics are the tools policy's series among m.
func toolMetrics(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, "caddy_mcp_tool_calls_total") || strings.HasPrefix(k, "caddy_mcp_deprecated_calls_total") || strings.HasPrefix(k, "caddy_mcp_tools_hidden_total") {
			out[k] = v
		}
	}
	return out
}

func TestToolPolicyWithTheTypeScriptClient(t *testing.T) {
	p, upstream := startPolicyServer(t)
	g := mcptest.StartGateway(t, policySite+mcptest.ProxyTo(upstream))
	slow := mcptest.CallToolStep("slow_report", map[string]any{"query": "q"})
	slow.TimeoutMS = 20000
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: g.URL + "/mcp", Steps: []mcptest.TSStep{
		mcptest.ListToolsStep(),
		mcptest.CallToolStep("admin_reset", map[string]any{}),
		mcptest.CallToolStep("old_search", map[string]any{"query": "q"}),
		slow,
		mcptest.CallToolStep("search_v2", map[string]any{"query": "z"}),
	}})
	require.Len(t, out.Results, 5)
	assert.Empty(t, out.TransportErrors)

	var list mcp.ListToolsResult
	require.NoError(t, out.Results[0].Decode(&list))
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	assert.NotContains(t, names, "admin_reset")
	assert.NotContains(t, names, "purge_delete_all")
	assert.Contains(t, names, "old_search")

	hidden := out.Results[1].CallToolResult(t)
	assert.True(t, hidden.IsError)
	assert.Contains(t, out.Results[1].Text(), `code="UNKNOWN_ACTION"`)
	assert.False(t, p.hasRun("admin_reset"))

	deprecated := out.Results[2].CallToolResult(t)
	assert.False(t, deprecated.IsError, "the client takes it as a success")
	require.Len(t, deprecated.Content, 2)
	assert.Contains(t, deprecated.Content[1].(*mcp.TextContent).Text, `<tool_error code="DEPRECATED" severity="warning">`)

	require.True(t, out.Results[3].OK, "a result, not the client's own timeout: %+v", out.Results[3].Error)
	assert.True(t, out.Results[3].CallToolResult(t).IsError)
	assert.Contains(t, out.Results[3].Text(), `code="TIMEOUT"`)
	assert.Equal(t, "slow_report", within(t, p.cancelled, "the call cancelled"))
	within(t, p.notified, "notifications/cancelled")

	assert.Equal(t, "search_v2 found z", out.Results[4].Text())
}

// A call cut at its deadline frees its guard place at once, and its
// TIMEOUT is sent at once, however long the upstream takes to accept the
// cancellation.
func TestAToolDeadlineAnswersAndFreesThePlaceAtOnce(t *testing.T) {
	p, upstream := startPolicyServer(t)
	p.takeCancellation = make(chan struct{})
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\ttimeout slow_* 300ms\n\t}\n\tconcurrency {\n\t\tmax 1\n\t\tqueue 0\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "policy-guard", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer cs.Close()

	start := time.Now()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow_report", Arguments: map[string]any{"query": "q"}})
	require.NoError(t, err)
	assert.Contains(t, mcptest.TextOf(t, res), `code="TIMEOUT"`)
	assert.Less(t, time.Since(start), 3*time.Second, "not held until the upstream takes the cancellation")
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_docs", Arguments: map[string]any{"query": "q"}})
	require.NoError(t, err)
	assert.Equal(t, "search_docs found q", mcptest.TextOf(t, res), "the one place was freed at the deadline")
	close(p.takeCancellation)
	assert.Equal(t, p.callID("slow_report"), within(t, p.notified, "notifications/cancelled"))
}

// A client that leaves a 2025-era call holding a guard place leaves it
// running (closing cancels nothing then); its deadline still cuts it, and
// the server is told to stop.
func TestAToolDeadlineCutsACallItsClientLeft(t *testing.T) {
	p, upstream := startPolicyServer(t)
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\ttimeout slow_* 500ms\n\t}\n\tconcurrency {\n\t\tmax 2\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	endpoint := g.URL + "/mcp"
	session := sessionOf(t, endpoint)
	ctx, leave := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint,
		strings.NewReader(`{"jsonrpc":"2.0","id":"left-1","method":"tools/call","params":{"name":"slow_report","arguments":{"query":"q"}}}`))
	require.NoError(t, err)
	sessionHeaders(req, session)
	go func() {
		<-p.started
		leave()
	}()
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err, "the client left")
	assert.Equal(t, `"left-1"`, within(t, p.notified, "notifications/cancelled"))
	assert.Equal(t, "slow_report", within(t, p.cancelled, "the call cancelled"))
}

// At MCP 2026-07-28 closing the call's stream is the cancellation: the
// gateway closes it at the deadline, and sends no notification.
func TestToolDeadlineClosesTheStreamFrom2026(t *testing.T) {
	closed := make(chan string, 4)
	notified := make(chan string, 4)
	upstream := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "notifications/cancelled") {
			notified <- string(body)
		}
		select {
		case <-r.Context().Done():
			closed <- r.Header.Get("Mcp-Name")
		case <-time.After(30 * time.Second):
		}
	}))
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\ttimeout slow_* 300ms\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	body := `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow_thing","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.URL+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "slow_thing")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(got), `"id":"c1"`)
	assert.Contains(t, string(got), `code=\"TIMEOUT\"`)
	assert.Contains(t, string(got), `"isError":true`)
	assert.Equal(t, "slow_thing", within(t, closed, "its stream closed"))
	select {
	case n := <-notified:
		t.Fatalf("a 2026-07-28 server got a notification: %s", n)
	case <-time.After(200 * time.Millisecond):
	}
}

// A tools/list answer the gateway must filter and cannot read with
// certainty never reaches the client as it is.
func TestAListThatCannotBeFilteredIsNotSent(t *testing.T) {
	upstream := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"ok"}],"Tools":[{"name":"admin_x"}]}}`, req.ID)
	}))
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	got := postAs(t, g.URL+"/mcp", "", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	assert.NotContains(t, got, "admin_x")
	assert.Contains(t, got, `"id":7`)
	assert.Contains(t, got, "INTERNAL_ERROR")
}

// A stream resumed with Last-Event-ID replays what the stream of an
// earlier POST carried: a tools/list answer among it is filtered as it was
// the first time, so a client that left that stream after its first event
// does not read the hidden tools on the replay.
func TestAResumedStreamHidesWhatTheListDid(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "replay", Version: "1"}, nil)
	for _, name := range []string{"search_docs", "admin_reset"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, queryArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	}
	upstream := mcptest.ServeMCP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	endpoint := g.URL + "/mcp"
	session := sessionOf(t, endpoint)

	post, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":41,"method":"tools/list"}`))
	require.NoError(t, err)
	sessionHeaders(post, session)
	resp, err := http.DefaultClient.Do(post)
	require.NoError(t, err)
	firstID := ""
	for sc := bufio.NewScanner(resp.Body); sc.Scan() && firstID == ""; {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			firstID = id
		}
	}
	require.NoError(t, resp.Body.Close(), "the client leaves after the first event")
	require.NotEmpty(t, firstID, "a priming event with an id")

	// The server takes a moment to see the first stream gone (409 until
	// then).
	require.Eventually(t, func() bool {
		get, err := http.NewRequestWithContext(t.Context(), http.MethodGet, endpoint, nil)
		require.NoError(t, err)
		sessionHeaders(get, session)
		get.Header.Set("Last-Event-ID", firstID)
		resp, err = http.DefaultClient.Do(get)
		require.NoError(t, err)
		if resp.StatusCode == http.StatusConflict {
			resp.Body.Close()
			return false
		}
		return true
	}, 5*time.Second, 20*time.Millisecond)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("resuming from %q: %s: %s", firstID, resp.Status, b)
	}
	var replayed strings.Builder
	for sc := bufio.NewScanner(resp.Body); sc.Scan() && !strings.Contains(replayed.String(), `"id":41`); {
		replayed.WriteString(sc.Text() + "\n")
	}
	assert.Contains(t, replayed.String(), `"search_docs"`, "the list is replayed")
	assert.NotContains(t, replayed.String(), "admin_reset", "filtered as the first time")
}

// sessionOf opens a 2025-11-25 session through endpoint with the Go SDK
// client and returns its Mcp-Session-Id.
func sessionOf(t *testing.T, endpoint string) string {
	t.Helper()
	tr := &headerTransport{add: http.Header{}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "replay-client", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.NotEmpty(t, tr.session)
	return tr.session
}

// Once the caller's tools are listed (a complete list, fresh), a call to a
// tool the list lacks gets the answer a hidden tool gets: a client cannot
// tell what the deny rules match by what it is answered.
func TestHiddenAndMissingToolsLookAlike(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\tdeny delete_*\n\t}\n}\n"+mcptest.ProxyTo(listServer(t)))
	url := g.URL + "/mcp"
	call := func(tool string) string {
		return postAs(t, url, "Bearer alice", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`)
	}
	assert.Contains(t, call("no_such_tool"), `"ran"`, "nothing listed yet: the server answers for its own tools")
	listed := postAs(t, url, "Bearer alice", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	require.NotContains(t, listed, "delete_invoice")

	// Both names are as far from the tools listed, so that their nearest
	// names are the same too.
	hidden, missing := call("delete_invoice"), call("remove_invoice")
	assert.Contains(t, hidden, `UNKNOWN_ACTION`)
	assert.NotContains(t, missing, `"ran"`, "the missing tool's call does not reach the server")
	assert.Equal(t, hidden, strings.ReplaceAll(missing, "remove_invoice", "delete_invoice"), "the same answer, but for the name")
}
