package fleet

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// federatedSite federates two servers, each a pool of stateful replicas
// behind lb_policy mcp_session.
func federatedSite(servers map[string][]*replica) string {
	site := "mcp {\n"
	for _, name := range []string{"one", "two"} {
		hosts := make([]string, 0, len(servers[name]))
		for _, r := range servers[name] {
			hosts = append(hosts, strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), mcptest.MCPPath))
		}
		site += "\tserver " + name + " {\n\t\treverse_proxy " + strings.Join(hosts, " ") + " {\n" +
			"\t\t\tlb_policy mcp_session {\n\t\t\t\tfallback round_robin\n\t\t\t}\n" +
			"\t\t\theader_up Host {upstream_hostport}\n\t\t}\n\t}\n"
	}
	return site + "}\n"
}

// A federated session opened through one node is served by the other,
// whose keys come from the same storage: each server's own session, and
// the replica that holds it, are sealed in the id the client holds, so
// every call reaches that replica in that session, through either node,
// and nothing is reopened.
func TestFederatedSessionsSpanNodes(t *testing.T) {
	t.Parallel()
	pools := map[string][]*replica{
		"one": {startReplica(t, "one-a"), startReplica(t, "one-b")},
		"two": {startReplica(t, "two-a"), startReplica(t, "two-b")},
	}
	storage := t.TempDir()
	body := federatedSite(pools)
	a, b := fleettest.StartNodeOn(t, body, storage), fleettest.StartNodeOn(t, body, storage)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	alt := newAlternating(t, a, b)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-federation", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: a.URL() + mcptest.MCPPath, HTTPClient: &http.Client{Transport: alt}, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	answered := map[string]map[string]bool{} // tool → the answers' "replica session"
	for range 4 {
		for _, tool := range []string{"whoami", "two__whoami"} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
			require.NoError(t, err, tool)
			require.False(t, res.IsError, "%s: %s", tool, mcptest.TextOf(t, res))
			if answered[tool] == nil {
				answered[tool] = map[string]bool{}
			}
			answered[tool][mcptest.TextOf(t, res)] = true
		}
	}
	for tool, answers := range answered {
		assert.Len(t, answers, 1, "%s: one replica, one session, through both nodes: %v", tool, answers)
	}
	nodes := map[string]bool{}
	for _, e := range alt.exchanges() {
		if e.rpc == "tools/call" {
			nodes[e.node] = true
		}
	}
	assert.Len(t, nodes, 2, "the calls went through both nodes")
	for _, name := range []string{"one", "two"} {
		sessions := 0
		for _, r := range pools[name] {
			sessions += len(r.issued())
		}
		assert.Equal(t, 1, sessions, "server %s: one session, never reopened", name)
	}
}
