package test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// An MCP server killed in the middle of a call (SIGKILL, as a crash or an
// OOM kill ends it), before the first byte of its answer (JSON) or after a
// progress notification (an event stream without event ids, which no
// client can resume): the call reached the server, and may have run. The
// official clients are answered, as the call's result, with an envelope of
// severity critical that says so, and no retry_after: retrying in N
// seconds could run a payment twice. A call that never reached a server
// keeps its retry_after (TestRefusedConnectionGivesHandoffUpstreamUnavailable).

// killedServers are the servers killed mid-call: the Go SDK's answering
// JSON, event streams without ids, and resumable streams (stateful, with
// an event store); the TypeScript SDK's with resumable streams, the most
// common server. The gateway resumes a resumable stream itself, meets a
// refused connection, and ends the stream with the envelope.
var killedServers = []struct {
	name          string
	program       func(bin string) mcptest.KillableProgram
	sse, stateful bool
}{
	{"go,json", func(bin string) mcptest.KillableProgram { return mcptest.KillableGo{Bin: bin} }, false, false},
	{"go,sse", func(bin string) mcptest.KillableProgram { return mcptest.KillableGo{Bin: bin, SSE: true} }, true, false},
	{"go,resumable", func(bin string) mcptest.KillableProgram {
		return mcptest.KillableGo{Bin: bin, SSE: true, Stateful: true, Events: true}
	}, true, true},
	{"ts,resumable", func(string) mcptest.KillableProgram { return mcptest.KillableTS{Stateful: true, Events: true} }, true, true},
}

// sessionsSite is a gateway that seals the sessions of stateful servers.
const sessionsSite = "mcp {\n\tsessions {\n\t\tsecret killed-test-secret-0123456789\n\t}\n}\n"

// assertMayHaveRun checks the envelope of a call that reached a server
// that then died.
func assertMayHaveRun(t *testing.T, env envelope.Parsed) {
	t.Helper()
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
	assert.Equal(t, envelope.SeverityCritical, env.Severity, "the call reached the server: it may have run")
	assert.Contains(t, env.Recovery, "may have run")
	assert.False(t, env.HasRetryAfter(), "no retry_after for a call that may have run")
}

func TestAServerKilledMidCallIsToldAsACallThatMayHaveRun(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for _, srv := range killedServers {
		for _, client := range mcptest.Clients {
			t.Run(fmt.Sprintf("server=%s,client=%s", srv.name, client), func(t *testing.T) {
				server := mcptest.StartKillable(t, srv.program(bin))
				site := "mcp\n"
				if srv.stateful {
					site = sessionsSite
				}
				gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: site + mcptest.ProxyTo(server.URL)})
				const refused = `caddy_mcp_stream_resumes_total{outcome="refused"}`
				before := mcpMetrics(t, gw.AdminURL)[refused]
				env, after := mcptest.KillMidCall(t, client, gw.URL+mcptest.MCPPath, server, srv.sse)
				t.Logf("the client had its result %v after the kill", after)
				assertMayHaveRun(t, env)
				if srv.stateful {
					assert.Equal(t, before+1, mcpMetrics(t, gw.AdminURL)[refused], "the gateway tried to resume the stream, on a server that was gone")
				}
			})
		}
	}
}
