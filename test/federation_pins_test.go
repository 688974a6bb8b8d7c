package test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// serversOfTools lists the federated endpoint's tools: each advertised
// name, and the server its _meta names.
func serversOfTools(t *testing.T, gw *mcptest.Gateway) map[string]string {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	out := map[string]string{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		require.NoError(t, err)
		server, _ := tool.Meta[contract.ServerMeta].(string)
		out[tool.Name] = server
	}
	return out
}

// `caddy mcp-lock` of a federated endpoint records each tool's server; a
// federation pinned to that lockfile keeps every name with its server when
// the servers are swapped, or a new one is put first, where the order
// alone would rename them.
func TestFederationPinsKeepTheLockedNamesWhateverTheOrder(t *testing.T) {
	first, second, third := startStatefulDemo(t), startStatefulDemo(t), startStatefulDemo(t)
	gw := mcptest.StartGateway(t, federatedSite([]string{"first", "second"}, []string{first, second}, ""))

	l, err := contract.Lock(t.Context(), gw.URL+mcptest.MCPPath, http.DefaultClient)
	require.NoError(t, err)
	locked := map[string]string{}
	for _, tool := range l.Tools {
		locked[tool.Name] = tool.Server
	}
	assert.Equal(t, "first", locked["add"])
	assert.Equal(t, "second", locked["second__add"])
	assert.Equal(t, serversOfTools(t, gw), locked, "the lockfile records the name map clients see")
	raw, err := l.Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"server": "second"`)
	lockfile := filepath.Join(t.TempDir(), "tools.lock.json")
	require.NoError(t, os.WriteFile(lockfile, raw, 0o600))
	pinned := "\tfederation {\n\t\tpins " + lockfile + "\n\t}\n"

	gw.Reload(t, federatedSite([]string{"second", "first"}, []string{second, first}, ""))
	swapped := serversOfTools(t, gw)
	assert.Equal(t, "second", swapped["add"], "unpinned, the order decides")
	assert.Equal(t, "first", swapped["first__add"])

	gw.Reload(t, federatedSite([]string{"second", "first"}, []string{second, first}, pinned))
	assert.Equal(t, locked, serversOfTools(t, gw), "pinned, two servers swapped rename nothing")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "federated", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	for _, name := range []string{"add", "second__add"} {
		// A call routed by the names the federation knows, before any list.
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"a": 2, "b": 3}})
		require.NoError(t, err, name)
		assert.Equal(t, map[string]any{"sum": 5.0}, res.StructuredContent, name)
	}
	cs.Close()

	gw.Reload(t, federatedSite([]string{"third", "second", "first"}, []string{third, second, first}, pinned))
	after := serversOfTools(t, gw)
	for name, server := range locked {
		assert.Equal(t, server, after[name], "%q keeps its server with a new one put first", name)
	}
	assert.Equal(t, "third", after["third__add"], "the new server's names are the ones prefixed")
	assert.Len(t, after, len(locked)+len(locked)/2)
}
