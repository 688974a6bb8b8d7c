package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// With validate, the gateway learns the demo server's tools from the
// tools/list answer passing through, and answers a call whose arguments
// break a tool's inputSchema itself: a <validation_error> result, which the
// official clients hand to the model as a result, not an exception. The
// model fixes the call and it succeeds.

func TestBadArgumentsGetAValidationErrorTheClientReadsAsAResult(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp {\n\tvalidate\n}\n"+mcptest.ProxyTo(mcptest.StartDemoServer(t)))
	endpoint := g.URL + "/mcp"

	t.Run("go client", func(t *testing.T) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "validate-go", Version: "1"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		require.NoError(t, err)
		defer cs.Close()
		_, err = cs.ListTools(t.Context(), nil)
		require.NoError(t, err)

		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"to": 500, "intervl_ms": 5}})
		require.NoError(t, err, "a result, not an error")
		require.True(t, res.IsError)
		assert.Equal(t, `<validation_error action="count">
<field name="intervl_ms">Unknown field 'intervl_ms'. You sent: 5. Did you mean 'interval_ms'?</field>
<field name="to">Too large. You sent: 500. Expected at most 100.</field>
<recovery>Fix the fields above and call the tool again. Do not explain the error.</recovery>
</validation_error>`, mcptest.TextOf(t, res))

		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"to": 2, "interval_ms": 0}})
		require.NoError(t, err)
		assert.False(t, res.IsError, "fixed, it reaches the server: %s", mcptest.TextOf(t, res))

	})

	t.Run("typescript client", func(t *testing.T) {
		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
			mcptest.ListToolsStep(),
			mcptest.CallToolStep("add", map[string]any{"a": "one", "b": 2}),
			mcptest.CallToolStep("add", map[string]any{"a": 1, "b": 2}),
			mcptest.CallToolStep("echo", map[string]any{}),
		}})
		require.Len(t, out.Results, 4)
		assert.Empty(t, out.TransportErrors)
		bad := out.Results[1].CallToolResult(t)
		assert.True(t, bad.IsError)
		assert.Equal(t, `<validation_error action="add">
<field name="a">Wrong type. You sent: 'one'. Expected a number.</field>
<recovery>Fix the fields above and call the tool again. Do not explain the error.</recovery>
</validation_error>`, out.Results[1].Text())
		fixed := out.Results[2].CallToolResult(t)
		assert.False(t, fixed.IsError)
		assert.Equal(t, "3", out.Results[2].Text())
		assert.Contains(t, out.Results[3].Text(), `<field name="text">Missing required field. You sent: (missing). Expected a string.</field>`)
	})
}

// Rate limits count a call before it is validated: refused calls still
// cost their tokens, so validation is no free CPU.
func TestRefusedArgumentsStillCostTheirTokens(t *testing.T) {
	site := "mcp {\n\tvalidate\n\trate_limit calls {\n\t\trate 2/1h\n\t}\n}\n" + mcptest.ProxyTo(mcptest.StartDemoServer(t))
	g := mcptest.StartGateway(t, site)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "validate-limits", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, nil)
	require.NoError(t, err)
	defer cs.Close()
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	for _, want := range []string{"<validation_error", "<validation_error", `code="RATE_LIMITED"`} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": "x", "b": 1}})
		require.NoError(t, err)
		assert.Contains(t, mcptest.TextOf(t, res), want)
	}
}

// listServer is an MCP server of the 2025 revisions as far as the gateway
// sees it: a tools/list without ttlMs or cacheScope (so private to the
// credentials that listed it, and complete until listed again), and calls
// answered "ran" when they reach it.
func listServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[
				{"name":"get_invoice","inputSchema":{"type":"object","properties":{"id":{"type":"string","format":"email"}},"required":["id"]}},
				{"name":"list_invoices","inputSchema":{"type":"object"}},
				{"name":"delete_invoice","inputSchema":{"type":"object"}}]}}`, req.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ran"}]}}`, req.ID)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// postAs sends one JSON-RPC request with Authorization auth and returns the
// answer's text.
func postAs(t *testing.T, url, auth, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Before its tools are listed, or for other credentials (the list is
// private to those that listed it), the gateway knows no schema: calls
// pass. Once a complete list is known, a tool it does not hold gets
// UNKNOWN_ACTION with the nearest names.
func TestCallsPassWhileNoSchemaIsKnown(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp {\n\tvalidate\n}\n"+mcptest.ProxyTo(listServer(t)))
	url := g.URL + "/mcp"
	call := func(auth, tool, args string) string {
		return postAs(t, url, auth, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
	}
	assert.Contains(t, call("Bearer alice", "get_invoice", `{"id":"x"}`), `"ran"`, "nothing listed yet")
	postAs(t, url, "Bearer alice", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	assert.Contains(t, call("Bearer alice", "get_invoice", `{"id":"x"}`), `Invalid email format. You sent: 'x'. Expected a valid email address.`)
	assert.Contains(t, call("Bearer alice", "get_invoice", `{"id":"a@example.com"}`), `"ran"`)
	assert.Contains(t, call("Bearer bob", "get_invoice", `{"id":"x"}`), `"ran"`, "bob's credentials listed nothing")
	unknown := call("Bearer alice", "get_invoce", `{}`)
	assert.Contains(t, unknown, `<tool_error code=\"UNKNOWN_ACTION\" severity=\"error\">`)
	assert.Contains(t, unknown, `<available_actions>\n  <action>get_invoice</action>\n  <action>delete_invoice</action>\n  <action>list_invoices</action>\n</available_actions>`)
	assert.Contains(t, unknown, `"isError":true`)
}

// A list with ttlMs 0 (what the Go SDK server sends, in every era) is stale
// at once: its schemas still check arguments, but a tool missing from it
// may have been added since, so the call goes to the server.
func TestUnknownToolsPassWhileTheListIsStale(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp {\n\tvalidate\n}\n"+mcptest.ProxyTo(mcptest.StartDemoServer(t)))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "validate-2026", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, nil)
	require.NoError(t, err)
	defer cs.Close()
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": true, "b": 1}})
	require.NoError(t, err)
	assert.Contains(t, mcptest.TextOf(t, res), `<field name="a">Wrong type. You sent: true. Expected a number.</field>`)
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ad", Arguments: map[string]any{}})
	require.Error(t, err, "the server's own answer to an unknown tool")
	assert.NotContains(t, err.Error(), "UNKNOWN_ACTION")
}

// What one caller lists never judges another's calls, unless the server
// marked the list public: not a list fetched without credentials, not a
// list fetched through another route to another server, and not a list the
// gateway cannot read as the server does (a cursor under another case).
func TestListsJudgeOnlyTheCallsTheyBelongTo(t *testing.T) {
	invoices := strings.TrimPrefix(listServer(t), "http://")
	g := mcptest.StartGateway(t, "mcp {\n\tvalidate\n}\nreverse_proxy "+invoices)
	url := g.URL + "/mcp"
	list := func(auth, params string) {
		postAs(t, url, auth, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":`+params+`}`)
	}
	badCall := func(auth string) string {
		return postAs(t, url, auth, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_invoice","arguments":{"id":"x"}}}`)
	}

	list("", `{"Cursor":null,"cursor":"p2"}`)
	assert.Contains(t, badCall(""), `"ran"`, "a request read otherwise by the server teaches nothing")
	list("", `{}`)
	assert.Contains(t, badCall(""), "<validation_error", "anonymous callers share the anonymous list")
	assert.Contains(t, badCall("Bearer alice"), `"ran"`, "alice's calls are not judged by a list fetched without credentials")
}

func TestAnotherRoutesListDoesNotJudgeThisOne(t *testing.T) {
	invoices := strings.TrimPrefix(listServer(t), "http://")
	demo := strings.TrimPrefix(strings.TrimSuffix(mcptest.StartDemoServer(t), "/mcp"), "http://")
	g2 := mcptest.StartGateway(t, "handle_path /a/* {\n\tmcp {\n\t\tvalidate\n\t}\n\treverse_proxy "+invoices+"\n}\n"+
		"handle_path /b/* {\n\tmcp {\n\t\tvalidate\n\t}\n\t"+mcptest.ProxyTo("http://"+demo)+"\n}")
	postAs(t, g2.URL+"/b/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	got := postAs(t, g2.URL+"/a/mcp", "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_invoice","arguments":{"id":"x"}}}`)
	assert.Contains(t, got, `"ran"`, "another route's list does not judge this one's calls")
}

// A call refused by validation takes no guard place: with the one place
// held by a slow call, a call breaking its schema is still told what to
// fix, while a valid call is shed. Every outcome is counted.
func TestRefusedArgumentsTakeNoGuardPlace(t *testing.T) {
	site := "mcp {\n\tvalidate\n\tconcurrency {\n\t\tmax 1\n\t\tqueue 0\n\t}\n}\n" + mcptest.ProxyTo(mcptest.StartDemoServer(t))
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Site: site, Admin: true})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "validate-guard", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, nil)
	require.NoError(t, err)
	defer cs.Close()
	before := mcpMetrics(t, g.AdminURL)
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err)

	slow := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 3000}})
		slow <- err
	}()
	gaugesReach(t, g.AdminURL, map[string]float64{`caddy_mcp_inflight{guard="default"}`: 1})

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": "x", "b": 1}})
	require.NoError(t, err)
	assert.Contains(t, mcptest.TextOf(t, res), "<validation_error", "refused by validation, not by the guard")
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 1}})
	require.NoError(t, err)
	assert.Contains(t, mcptest.TextOf(t, res), `code="SERVER_BUSY"`, "the one place is held")
	require.NoError(t, <-slow)

	got := delta(before, mcpMetrics(t, g.AdminURL))
	assert.Equal(t, 1.0, got[`caddy_mcp_validations_total{outcome="invalid"}`])
	assert.Equal(t, 2.0, got[`caddy_mcp_validations_total{outcome="valid"}`], "the slow call and the shed one")
	assert.Equal(t, 4.0, got[`caddy_mcp_tools_learned_total{}`], "the demo server's tools")
	assert.Zero(t, got[`caddy_mcp_tool_schemas_invalid_total{}`])
}

// When the server says its tools changed (notifications/tools/list_changed,
// here on the session's GET stream), the schemas learned before are
// forgotten: a call valid under the new schema reaches the server, where
// the old one would have refused it.
func TestAListChangedNotificationForgetsTheSchemas(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)
	addTool := func(argType string) {
		server.AddTool(&mcp.Tool{Name: "store", InputSchema: &jsonschema.Schema{Type: "object",
			Properties: map[string]*jsonschema.Schema{"v": {Type: argType}}, Required: []string{"v"}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
			})
	}
	addTool("number")
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	g := mcptest.StartGateway(t, "mcp {\n\tvalidate\n}\n"+mcptest.ProxyTo(srv.URL))

	changed := make(chan struct{}, 1)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "validate-changes", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer cs.Close()
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	call := func() string {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "store", Arguments: map[string]any{"v": "text"}})
		require.NoError(t, err)
		return mcptest.TextOf(t, res)
	}
	assert.Contains(t, call(), "<validation_error", "a number was expected")

	addTool("string")
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed reached the client")
	}
	assert.Equal(t, "stored", call(), "the old schema is forgotten: the call reaches the server")
}

// perCallerListServer answers tools/list with a list of 100 tools of the
// caller's own (named after its Authorization), get_invoice among them,
// and any call with "ran".
func perCallerListServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		if req.Method != "tools/list" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ran"}]}}`, req.ID)
			return
		}
		caller := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		tools := []string{`{"name":"get_invoice","inputSchema":{"type":"object","properties":{"id":{"type":"string","format":"email"}},"required":["id"]}}`}
		for i := range 99 {
			tools = append(tools, fmt.Sprintf(`{"name":"%s_report_%02d","inputSchema":{"type":"object"}}`, caller, i))
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s]}}`, req.ID, strings.Join(tools, ","))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Finding: a client rotating its Authorization made the gateway keep a
// list per value, up to 1,000 lists of any size (5.1 GiB of 5,000-tool
// lists), each new one evicting an arbitrary other. With
// max_catalog_size, 1,500 callers given lists of their own hold no more
// than the bound, which /mcp/status shows, and a caller whose calls were
// checked keeps its list: ever new credentials evict only lists no call
// used.
func TestRotatingCredentialsStayWithinTheCatalogBound(t *testing.T) {
	const bound = 1 << 20
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true,
		Site: "mcp {\n\tvalidate {\n\t\tmax_catalog_size 1MiB\n\t}\n}\n" + mcptest.ProxyTo(perCallerListServer(t))})
	url := g.URL + "/mcp"
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	badCall := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_invoice","arguments":{"id":"x"}}}`

	postAs(t, url, "Bearer steady", list)
	require.Contains(t, postAs(t, url, "Bearer steady", badCall), "<validation_error")
	before := heapObjects()
	for i := range 1500 {
		require.Contains(t, postAs(t, url, fmt.Sprintf("Bearer rotating-%04d", i), list), "get_invoice")
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	grown := int64(heapObjects()) - int64(before)

	_, status, err := getStatus(g.AdminURL)
	require.NoError(t, err)
	require.NotNil(t, status.toolCatalog())
	catalog := *status.toolCatalog()
	t.Logf("after 1,500 callers: heap grew %d bytes; the catalog holds %+v", grown, catalog)
	assert.EqualValues(t, bound, catalog.MaxBytes)
	assert.LessOrEqual(t, catalog.Bytes, int64(bound))
	assert.Less(t, grown, int64(bound+512<<10), "the heap follows the bound")
	assert.Positive(t, catalog.Evictions)
	assert.Less(t, catalog.Keys, 1500)
	metrics := mcpMetrics(t, g.AdminURL)
	assert.EqualValues(t, catalog.Bytes, metrics["caddy_mcp_tool_catalog_bytes{}"])
	assert.EqualValues(t, bound, metrics["caddy_mcp_tool_catalog_max_bytes{}"])
	assert.EqualValues(t, catalog.Evictions, metrics["caddy_mcp_tool_catalog_evictions_total{}"])
	assert.Contains(t, postAs(t, url, "Bearer steady", badCall), "<validation_error", "the steady caller's list is still known")
}
