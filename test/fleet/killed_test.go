package fleet

import (
	"fmt"
	"net/http/httputil"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A stateful server with resumable streams, behind two gateway nodes that
// share nothing but the sessions' secret, each request of a client going
// to the other node than the one before (a load balancer in front): the
// server is killed mid-call, once the client had the stream's first
// event. The node that held the stream resumes it, meets a refused
// connection, and the client takes the critical envelope as the call's
// result; nothing of the stream had to be shared.

// killableServers are the stateful servers with resumable streams.
var killableServers = map[string]func(bin string) mcptest.KillableProgram{
	"go": func(bin string) mcptest.KillableProgram {
		return mcptest.KillableGo{Bin: bin, SSE: true, Stateful: true, Events: true}
	},
	"ts": func(string) mcptest.KillableProgram { return mcptest.KillableTS{Stateful: true, Events: true} },
}

// twoNodes starts two nodes with sessions sealed by one secret in front of
// server (its endpoint), and returns the endpoint of a front that sends
// each request to them in turn, and the transport that does.
func twoNodes(t *testing.T, server string) (string, *alternating) {
	t.Helper()
	upstream := strings.TrimSuffix(strings.TrimPrefix(server, "http://"), mcptest.MCPPath)
	site := "mcp {\n\tsessions {\n\t\tsecret " + secretA + "\n\t}\n}\n" +
		"reverse_proxy " + upstream + " {\n\tlb_policy mcp_session\n\theader_up Host {upstream_hostport}\n}"
	a, b := fleettest.StartNode(t, site), fleettest.StartNode(t, site)
	turns := newAlternating(t, a, b)
	t.Cleanup(func() {
		if t.Failed() {
			// Which of the client's requests came back, from which node.
			t.Logf("the front's exchanges (node %s first): %+v", a.URL(), turns.exchanges())
		}
	})
	front := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "front" },
		Transport:     turns,
		FlushInterval: -1,
	}
	return mcptest.ServeMCP(t, front), turns
}

// requireBothNodes checks that the client's requests went to both nodes.
func requireBothNodes(t *testing.T, turns *alternating) {
	t.Helper()
	nodes := map[string]bool{}
	for _, e := range turns.exchanges() {
		nodes[e.node] = true
	}
	require.Len(t, nodes, 2, "the client's requests went to both nodes: %+v", turns.exchanges())
}

func TestAServerKilledMidCallBehindTwoNodesIsToldAsACallThatMayHaveRun(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for name, program := range killableServers {
		for _, client := range mcptest.Clients {
			t.Run(fmt.Sprintf("server=%s,client=%s", name, client), func(t *testing.T) {
				server := mcptest.StartKillable(t, program(bin))
				endpoint, turns := twoNodes(t, server.URL)
				env, after := mcptest.KillMidCall(t, client, endpoint, server, true)
				requireBothNodes(t, turns)
				t.Logf("the client had its result %v after the kill", after)
				assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
				assert.Equal(t, envelope.SeverityCritical, env.Severity)
				assert.False(t, env.HasRetryAfter())
			})
		}
	}
}

// The same servers restarted between two calls of a client session whose
// requests alternate between the nodes: each node meets the 404 of the
// restarted server and reopens the session on its own (each remembers
// where the sessions it reopened live), and the client's next call
// succeeds in the same session.
func TestARestartedServerBehindTwoNodesKeepsItsClientsSessions(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for name, program := range killableServers {
		for _, client := range mcptest.Clients {
			t.Run(fmt.Sprintf("server=%s,client=%s", name, client), func(t *testing.T) {
				server := mcptest.StartKillable(t, program(bin))
				watched, streams := mcptest.WatchStreams(t, server.URL)
				endpoint, turns := twoNodes(t, watched)
				texts, first, last := mcptest.EchoAcrossRestart(t, client, endpoint, server, streams)
				requireBothNodes(t, turns)
				assert.Equal(t, []string{"one", "two"}, texts)
				assert.Equal(t, first, last, "the client kept its session id")
			})
		}
	}
}
