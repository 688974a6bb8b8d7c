package test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
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
