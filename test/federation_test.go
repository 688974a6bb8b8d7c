package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
	"github.com/caddymcp/caddy-mcp/federation"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// federatedSite is an mcp block federating the servers at urls, each a
// server block named by names, in that order.
func federatedSite(names, urls []string, extra string) string {
	site := "mcp {\n"
	for i, name := range names {
		site += "\tserver " + name + " {\n\t\t" + mcptest.ProxyTo(urls[i]) + "\n\t}\n"
	}
	return site + extra + "}\n"
}

// startStatefulDemo is a stateful Go SDK demo server.
func startStatefulDemo(t *testing.T) string {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return demoserver.New() }, nil)
	return mcptest.ServeMCP(t, h)
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// Two official Go SDK servers, both stateful, with every tool name in
// common, and a TypeScript SDK server, stateful, whose tools are its own:
// the first Go server keeps its names, the second's are prefixed, the
// TypeScript server's keep theirs, and the Go client calls each by its
// advertised name, on the server that has it.
func TestFederationNamesAndRoutesThreeServers(t *testing.T) {
	first, second := startStatefulDemo(t), startStatefulDemo(t)
	ts := mcptest.StartKillable(t, mcptest.KillableTS{Stateful: true})
	gw := mcptest.StartGateway(t, federatedSite([]string{"first", "second", "ts"}, []string{first, second, ts.URL}, ""))

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()

	names := toolNames(t, cs)
	assert.Subset(t, names, []string{"add", "echo", "second__add", "second__echo", "work"})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "second__add", Arguments: map[string]any{"a": 2, "b": 3}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"sum": 5.0}, res.StructuredContent)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 1}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"sum": 2.0}, res.StructuredContent)

	// A name no server has, and one that reads like an advertised one.
	for name, code := range map[string]envelope.Code{"ad": envelope.UnknownAction, "ADD": envelope.HandoffNamespaceMismatch, "second__adx": envelope.HandoffNamespaceMismatch} {
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		require.NoError(t, err, name)
		require.True(t, res.IsError, name)
		p, err := envelope.Parse(mcptest.TextOf(t, res))
		require.NoError(t, err, name)
		assert.Equal(t, code, p.Code, name)
		t.Logf("%s: %s", name, mcptest.TextOf(t, res))
	}
}

// callEnvelope calls name and reads the envelope of its result.
func callEnvelope(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) envelope.Parsed {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	require.True(t, res.IsError, name)
	p, err := envelope.Parse(mcptest.TextOf(t, res))
	require.NoError(t, err, name)
	return p
}

// Killing one server leaves the others serving at once; its calls are
// answered HANDOFF_UPSTREAM_UNAVAILABLE; restarted, it is given a new
// session for the client's, which the client keeps.
func TestFederationOneServerDownLeavesTheOthersServing(t *testing.T) {
	demo := startStatefulDemo(t)
	ts := mcptest.StartKillable(t, mcptest.KillableTS{Stateful: true})
	gw := mcptest.StartGateway(t, federatedSite([]string{"demo", "ts"}, []string{demo, ts.URL}, ""))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	assert.Contains(t, toolNames(t, cs), "ts__echo", "the TypeScript server's echo is the second echo")

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ts__echo", Arguments: map[string]any{"text": "before"}})
	require.NoError(t, err)
	assert.Equal(t, "before", mcptest.TextOf(t, res))

	ts.Kill()
	p := callEnvelope(t, cs, "ts__echo", map[string]any{"text": "down"})
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, p.Code)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still"}})
	require.NoError(t, err)
	assert.Equal(t, "still", mcptest.TextOf(t, res), "the other server serves while one is down")

	ts.Restart(t)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ts__echo", Arguments: map[string]any{"text": "after"}})
	require.NoError(t, err)
	assert.Equal(t, "after", mcptest.TextOf(t, res), "the restarted server is reopened for the client's session")
}

// The TypeScript SDK's client calls each tool by its advertised name,
// across the three servers: two Go SDK servers with every tool name in
// common, and the TypeScript SDK's, stateful, whose echo is the third.
func TestFederationServesTheTypeScriptClient(t *testing.T) {
	first, second := startStatefulDemo(t), startStatefulDemo(t)
	ts := mcptest.StartKillable(t, mcptest.KillableTS{Stateful: true})
	gw := mcptest.StartGateway(t, federatedSite([]string{"first", "second", "ts"}, []string{first, second, ts.URL}, ""))
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: gw.URL + mcptest.MCPPath, Steps: []mcptest.TSStep{
		mcptest.ListToolsStep(),
		mcptest.CallToolStep("echo", map[string]any{"text": "one"}),
		mcptest.CallToolStep("second__echo", map[string]any{"text": "two"}),
		mcptest.CallToolStep("ts__echo", map[string]any{"text": "three"}),
		mcptest.CallToolStep("third__echo", map[string]any{"text": "four"}),
	}})
	require.Len(t, out.Results, 5)
	for _, r := range out.Results {
		require.True(t, r.OK, "%+v", r.Error)
	}
	for _, name := range []string{`"echo"`, `"second__echo"`, `"ts__echo"`, `"work"`} {
		assert.Contains(t, string(out.Results[0].Result), name)
	}
	assert.Equal(t, "one", out.Results[1].Text())
	assert.Equal(t, "two", out.Results[2].Text())
	assert.Equal(t, "three", out.Results[3].Text())
	res := out.Results[4].CallToolResult(t)
	require.True(t, res.IsError)
	p, err := envelope.Parse(mcptest.TextOf(t, res))
	require.NoError(t, err)
	assert.Equal(t, envelope.UnknownAction, p.Code)
	assert.NotEmpty(t, out.Session.SessionID)
	assert.Equal(t, out.Session.FirstSessionID, out.Session.SessionID, "one session throughout")
}

// A session id the gateway did not seal is not found, whatever it holds.
func TestFederationRefusesAForgedSession(t *testing.T) {
	demo := startStatefulDemo(t)
	gw := mcptest.StartGateway(t, federatedSite([]string{"demo"}, []string{demo}, ""))
	for _, forged := range []string{"made-up", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.URL+mcptest.MCPPath,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", forged)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, string(body))
		assert.Contains(t, string(body), "Session not found")
	}
}

// A server added last renames nothing clients know: its names that
// another server gives are the ones prefixed.
func TestFederationAFourthServerRenamesNothing(t *testing.T) {
	urls := []string{startStatefulDemo(t), startStatefulDemo(t), mcptest.StartKillable(t, mcptest.KillableTS{Stateful: true}).URL}
	servers := []string{"first", "second", "ts"}
	gw := mcptest.StartGateway(t, federatedSite(servers, urls, ""))
	listed := func() []string {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
		require.NoError(t, err)
		defer cs.Close()
		return toolNames(t, cs)
	}
	before := listed()
	gw.Reload(t, federatedSite(append(servers, "fourth"), append(urls, startStatefulDemo(t)), ""))
	after := listed()
	assert.Subset(t, after, before, "every name listed before is listed, unchanged")
	assert.Contains(t, after, "fourth__add")
	assert.Len(t, after, len(before)+4, "the fourth server's four tools, each prefixed")
}

// Two servers that ask the client at once, each with the id it chose
// (the same: each server counts its own), each get their own answer.
func TestFederationSendsEachServersRequestBackToIt(t *testing.T) {
	bin := mcptest.BuildEverythingServer(t)
	a, b := mcptest.StartEverythingServer(t, bin)+mcptest.MCPPath, mcptest.StartEverythingServer(t, bin)+mcptest.MCPPath
	gw := mcptest.StartGateway(t, federatedSite([]string{"a", "b"}, []string{a, b}, ""))
	asked := make(chan string, 2)
	both := make(chan struct{})
	var once sync.Once
	var n atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			message := req.Params.Message
			asked <- message
			if n.Add(1) == 2 {
				once.Do(func() { close(both) })
			}
			select { // both servers' requests are out before either is answered
			case <-both:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "answer to " + message}}, nil
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	require.Contains(t, toolNames(t, cs), "b__test_elicitation")

	var wg sync.WaitGroup
	got := map[string]string{}
	var mu sync.Mutex
	for tool, message := range map[string]string{"test_elicitation": "one", "b__test_elicitation": "two"} {
		wg.Go(func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": message}})
			if !assert.NoError(t, err, tool) {
				return
			}
			mu.Lock()
			got[tool] = mcptest.TextOf(t, res)
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, map[string]string{
		"test_elicitation":    "Elicitation result: action=accept, content=map[username:answer to one]",
		"b__test_elicitation": "Elicitation result: action=accept, content=map[username:answer to two]",
	}, got)
	assert.Len(t, asked, 2)
}

// The client's GET stream carries a server's notification that belongs
// to no request: a tool added, and the merged list asked again shows it.
func TestFederationCarriesEveryServersStream(t *testing.T) {
	srv := demoserver.New()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	streamOpen := make(chan struct{})
	var opened sync.Once
	stateful := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w = &headerSignal{ResponseWriter: w, wrote: func() { opened.Do(func() { close(streamOpen) }) }}
		}
		sdk.ServeHTTP(w, r)
	}))
	gw := mcptest.StartGateway(t, federatedSite([]string{"demo", "other"}, []string{startStatefulDemo(t), stateful}, ""))
	changed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath}, nil)
	require.NoError(t, err)
	defer cs.Close()
	require.NotContains(t, toolNames(t, cs), "added")

	// Once the server's stream for the client is open (the gateway's GET
	// for it answered), a tool added is told on it.
	<-streamOpen
	mcp.AddTool(srv, &mcp.Tool{Name: "added", Description: "added later"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, nil, nil
	})
	select {
	case <-changed:
	case <-t.Context().Done():
		t.Fatal("no list_changed reached the client")
	}
	assert.Contains(t, toolNames(t, cs), "added")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "added", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "here", mcptest.TextOf(t, res))
}

// headerSignal calls wrote once the header of an answer is written.
type headerSignal struct {
	http.ResponseWriter
	wrote func()
}

func (h *headerSignal) WriteHeader(status int) {
	h.ResponseWriter.WriteHeader(status)
	h.wrote()
}

func (h *headerSignal) Flush() {
	_ = http.NewResponseController(h.ResponseWriter).Flush()
	h.wrote()
}

func (h *headerSignal) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// countingServer is a stateful demo server that counts the JSON-RPC
// methods it is sent.
type countingServer struct {
	url string
	mu  sync.Mutex
	n   map[string]int
}

func startCountingServer(t *testing.T) *countingServer {
	c := &countingServer{n: map[string]int{}}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return demoserver.New() }, nil)
	c.url = mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		c.mu.Lock()
		c.n[m.Method]++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	return c
}

func (c *countingServer) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// A server of two stateful replicas behind lb_policy mcp_session: every
// request of the client's session reaches the replica that holds its
// session there, while round_robin would alternate.
func TestFederationPinsEachServersSessionToItsReplica(t *testing.T) {
	r1, r2 := startCountingServer(t), startCountingServer(t)
	host := func(u string) string { return strings.TrimSuffix(strings.TrimPrefix(u, "http://"), mcptest.MCPPath) }
	site := "mcp {\n\tserver demo {\n\t\t" + mcptest.ProxyTo(startStatefulDemo(t)) + "\n\t}\n" +
		"\tserver pool {\n\t\treverse_proxy " + host(r1.url) + " " + host(r2.url) + " {\n\t\t\theader_up Host {upstream_hostport}\n\t\t\tlb_policy mcp_session {\n\t\t\t\tfallback round_robin\n\t\t\t}\n\t\t}\n\t}\n" +
		"\tfederation {\n\t\trename pool echo pool_echo\n\t}\n}\n"
	gw := mcptest.StartGateway(t, site)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	for i := range 6 {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "pool_echo", Arguments: map[string]any{"text": fmt.Sprint(i)}})
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(i), mcptest.TextOf(t, res))
	}
	assert.Equal(t, 1, r1.count("initialize")+r2.count("initialize"), "one session, never reopened on the other replica")
	assert.ElementsMatch(t, []int{0, 6}, []int{r1.count("tools/call"), r2.count("tools/call")}, "every call on the replica that holds the session")
}

// Each span of a routed call names the server it went to, and the
// federation's metrics count it under that server.
func TestFederationNamesTheServerOnSpansAndMetrics(t *testing.T) {
	rec := mcptest.TraceReceiver(t)
	a, b := startSeenServer(t), startSeenServer(t)
	gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Site:  "tracing {\n\tspan http\n}\n" + federatedSite([]string{"a", "b"}, []string{a.url, b.url}, ""),
		Admin: true,
	})
	const passed = `caddy_mcp_federation_routed_requests_total{outcome="passed",server="b"}`
	before := mcpMetrics(t, gw.AdminURL)[passed] // the metrics are the process's
	traceID, traceparent := newTraceID(t)
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"b__echo","arguments":{"text":"x"}}}`
	resp, got := post(t, gw.URL+mcptest.MCPPath, body, withHeader("traceparent", traceparent, "Mcp-Method", "tools/call"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
	assert.Contains(t, string(got), `"text":"x"`)
	assert.Equal(t, 1, b.calls())
	assert.Zero(t, a.calls())
	spans := rec.Trace(t, traceID, "tools/call b__echo")
	for _, s := range spans {
		if s.Name == "tools/call b__echo" {
			assert.Equal(t, "b", s.Attributes["caddy.mcp.server"])
		}
	}
	assert.Equal(t, before+1, mcpMetrics(t, gw.AdminURL)[passed])

	raw, _, err := getStatus(gw.AdminURL)
	require.NoError(t, err)
	var status struct {
		Handlers []struct {
			Features struct {
				Federation *federation.Status `json:"federation"`
			} `json:"features"`
		} `json:"handlers"`
	}
	require.NoError(t, json.Unmarshal(raw, &status), "%s", raw)
	require.Len(t, status.Handlers, 1)
	fed := status.Handlers[0].Features.Federation
	require.NotNil(t, fed, "%s", raw)
	assert.Equal(t, []string{"a", "b"}, fed.Servers)
	assert.Equal(t, "__", fed.Separator)
	assert.Positive(t, fed.Tools)
	assert.Equal(t, fed.Tools/2, fed.Prefixed, "the second server's tools, each a name the first gives")
}

// A server that answers, in a call's stream, an id it was never sent (one
// the client may have sent another server) has that response kept from
// the client; its answer to the call passes.
func TestFederationKeepsAServersStrayResponseFromTheClient(t *testing.T) {
	stray := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "tools/list":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"liar","inputSchema":{"type":"object"}}]}}`, m.ID)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":777,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"not yours\"}]}}\n\n")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"yours\"}]}}\n\n", m.ID)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	demo := startSeenServer(t)
	gw := mcptest.StartGateway(t, federatedSite([]string{"demo", "stray"}, []string{demo.url, stray}, ""))
	resp, got := post(t, gw.URL+mcptest.MCPPath, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"liar","arguments":{}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
	assert.NotContains(t, string(got), "not yours")
	assert.NotContains(t, string(got), `"id":777`)
	assert.Contains(t, string(got), `"text":"yours"`)
	assert.Contains(t, string(got), "to no request it was sent")
}

// Every feature works with the names clients see: a rate limit and a
// policy by advertised name, validate with each server's schema under its
// advertised name, a result budget by advertised name.
func TestFederationFeaturesUseTheAdvertisedNames(t *testing.T) {
	first, second := startStatefulDemo(t), startStatefulDemo(t)
	extra := "\trate_limit second_adds {\n\t\trate 1/1h\n\t\ttools second__add\n\t}\n" +
		"\ttools {\n\t\tdeny second__count\n\t}\n" +
		"\tvalidate\n" +
		"\tresults {\n\t\tmax second__echo 64\n\t}\n"
	gw := mcptest.StartGateway(t, federatedSite([]string{"first", "second"}, []string{first, second}, extra))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	names := toolNames(t, cs)
	assert.NotContains(t, names, "second__count", "hidden by the policy, by its advertised name")
	assert.Contains(t, names, "count")

	// The limit counts second__add alone.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "second__add", Arguments: map[string]any{"a": 1, "b": 2}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, envelope.RateLimited, callEnvelope(t, cs, "second__add", map[string]any{"a": 1, "b": 2}).Code)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "the first server's add is not limited")

	assert.Equal(t, envelope.UnknownAction, callEnvelope(t, cs, "second__count", map[string]any{}).Code)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": 7}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, mcptest.TextOf(t, res), "<validation_error", "the server's schema, under the name it is advertised by")

	p := callEnvelope(t, cs, "second__echo", map[string]any{"text": strings.Repeat("x", 200)})
	assert.Equal(t, "RESULT_TOO_LARGE", string(p.Code))
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strings.Repeat("x", 200)}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "the first server's echo has no budget")
}

// restartingServer is a stateful demo server that can lose every session
// and refuse to start new ones (it is restarting), then come back with
// none of its old sessions.
type restartingServer struct {
	url     string
	mu      sync.Mutex
	down    bool
	handler http.Handler
}

func startRestartingServer(t *testing.T) *restartingServer {
	s := &restartingServer{}
	s.up()
	s.url = mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		down, h := s.down, s.handler
		s.mu.Unlock()
		switch {
		case down && r.Header.Get("Mcp-Session-Id") != "":
			http.Error(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`, http.StatusNotFound)
		case down:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	return s
}

func (s *restartingServer) up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = false
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return demoserver.New() }, nil)
}

func (s *restartingServer) goDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
}

// A server that lost the client's session and cannot open a new one yet
// is answered HANDOFF_CONNECTING for its calls alone: the client keeps its
// session, the other server serves it, and once the server is back its
// calls work again under the same session.
func TestFederationAServerThatLostItsSessionsIsConnectingNotGone(t *testing.T) {
	flaky := startRestartingServer(t)
	gw := mcptest.StartGateway(t, federatedSite([]string{"demo", "flaky"}, []string{startStatefulDemo(t), flaky.url}, ""))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "flaky__echo", Arguments: map[string]any{"text": "before"}})
	require.NoError(t, err)
	assert.Equal(t, "before", mcptest.TextOf(t, res))

	flaky.goDown()
	p := callEnvelope(t, cs, "flaky__echo", map[string]any{"text": "down"})
	assert.Equal(t, envelope.HandoffConnecting, p.Code)
	assert.True(t, p.HasRetryAfter(), "the model is told when to come back")
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "other"}})
	require.NoError(t, err)
	assert.Equal(t, "other", mcptest.TextOf(t, res), "the other server never noticed")

	flaky.up()
	assert.Contains(t, toolNames(t, cs), "flaky__echo", "listed again: its session reopened for the list")
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "flaky__echo", Arguments: map[string]any{"text": "after"}})
	require.NoError(t, err)
	assert.Equal(t, "after", mcptest.TextOf(t, res), "back, under the client's same session")
}
