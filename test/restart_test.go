package test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A stateful server restarted between two calls of one client session (a
// new process on the same port, which knows none of the sessions it held):
// it answers 404 to the session, and the gateway, with sessions, opens a
// new one on the client's behalf and sends the call again. The client's
// next call succeeds, in the same client session, with the session id it
// holds; the Go client's standalone GET stream, which reconnects first,
// comes back too, and the session is not closed under it.

// restartedServers are the stateful servers restarted.
var restartedServers = map[string]func(bin string) mcptest.KillableProgram{
	"go,json": func(bin string) mcptest.KillableProgram { return mcptest.KillableGo{Bin: bin, Stateful: true} },
	"go,resumable": func(bin string) mcptest.KillableProgram {
		return mcptest.KillableGo{Bin: bin, SSE: true, Stateful: true, Events: true}
	},
	"ts,resumable": func(string) mcptest.KillableProgram { return mcptest.KillableTS{Stateful: true, Events: true} },
}

// A stateless server (the Go SDK's, which gives no session id) has
// no sessions to lose: behind a gateway with sessions, its restart changes
// nothing, and nothing is reopened.
func TestARestartedStatelessServerIsLeftAlone(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	server := mcptest.StartKillable(t, mcptest.KillableGo{Bin: bin})
	gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: sessionsSite + mcptest.ProxyTo(server.URL)})
	const reopened = "caddy_mcp_sessions_reopened_total{}"
	before := mcpMetrics(t, gw.AdminURL)[reopened]
	texts, first, last := mcptest.EchoAcrossRestart(t, "go", gw.URL+mcptest.MCPPath, server, nil)
	assert.Equal(t, []string{"one", "two"}, texts)
	assert.Empty(t, first, "no session")
	assert.Empty(t, last)
	assert.Equal(t, before, mcpMetrics(t, gw.AdminURL)[reopened])
}

func TestARestartedServerKeepsItsClientsSessions(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for name, program := range restartedServers {
		for _, client := range mcptest.Clients {
			t.Run(fmt.Sprintf("server=%s,client=%s", name, client), func(t *testing.T) {
				server := mcptest.StartKillable(t, program(bin))
				watched, streams := mcptest.WatchStreams(t, server.URL)
				gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: sessionsSite + mcptest.ProxyTo(watched)})
				const reopened = "caddy_mcp_sessions_reopened_total{}"
				before := mcpMetrics(t, gw.AdminURL)[reopened]
				texts, first, last := mcptest.EchoAcrossRestart(t, client, gw.URL+mcptest.MCPPath, server, streams)
				assert.Equal(t, []string{"one", "two"}, texts)
				assert.Equal(t, first, last, "the client kept its session id")
				assert.GreaterOrEqual(t, mcpMetrics(t, gw.AdminURL)[reopened], before+1)
			})
		}
	}
}
