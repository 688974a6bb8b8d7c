package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// clientCall calls the tool work through endpoint with an official client
// (client: "go" or "ts"), asking for progress, sends a value on progressed
// when the client has the progress notification, and sends the envelope of
// the result it takes, or fails the test if it takes none.
type clientCall func(t *testing.T, endpoint string, progressed chan<- struct{}, got chan<- envelope.Parsed)

var killedClients = map[string]clientCall{
	"go": func(t *testing.T, endpoint string, progressed chan<- struct{}, got chan<- envelope.Parsed) {
		opts := &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		}}
		session, err := mcp.NewClient(&mcp.Implementation{Name: "killed", Version: "0"}, opts).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		if !assert.NoError(t, err) {
			close(got)
			return
		}
		defer session.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "work", Meta: mcp.Meta{"progressToken": "p"}})
		if !assert.NoError(t, err, "the call must come back as a result") || !assert.True(t, res.IsError) {
			close(got)
			return
		}
		env, err := envelope.Parse(mcptest.TextOf(t, res))
		assert.NoError(t, err)
		got <- env
	},
	"ts": func(t *testing.T, endpoint string, progressed chan<- struct{}, got chan<- envelope.Parsed) {
		signal := mcptest.NewSignal(t)
		go func() {
			for range signal.Reached {
				select {
				case progressed <- struct{}{}:
				default:
				}
			}
		}()
		step := mcptest.CallToolStep("work", map[string]any{})
		step.Progress, step.TimeoutMS, step.ProgressURL = true, 30000, signal.URL
		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{step}})
		if !assert.Len(t, out.Results, 1) || !assert.True(t, out.Results[0].OK, "the call must come back as a result: %v", out.Results[0].Error) {
			close(got)
			return
		}
		res := out.Results[0].CallToolResult(t)
		assert.True(t, res.IsError)
		env, err := envelope.Parse(mcptest.TextOf(t, res))
		assert.NoError(t, err)
		got <- env
	},
}

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

func TestAServerKilledMidCallIsToldAsACallThatMayHaveRun(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for _, srv := range killedServers {
		for name, call := range killedClients {
			t.Run(fmt.Sprintf("server=%s,client=%s", srv.name, name), func(t *testing.T) {
				server := mcptest.StartKillable(t, srv.program(bin))
				site := "mcp\n"
				if srv.stateful {
					site = sessionsSite
				}
				gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: site + mcptest.ProxyTo(server.URL)})
				const refused = `caddy_mcp_stream_resumes_total{outcome="refused"}`
				before := mcpMetrics(t, gw.AdminURL)[refused]
				got, progressed := make(chan envelope.Parsed, 1), make(chan struct{}, 1)
				go call(t, gw.URL+mcptest.MCPPath, progressed, got)
				select {
				case <-server.Called:
				case <-time.After(30 * time.Second):
					t.Fatal("the call never reached the server")
				}
				if srv.sse {
					// Killed once the client has had the first event of
					// the stream.
					select {
					case <-progressed:
					case <-time.After(30 * time.Second):
						t.Fatal("the progress notification never reached the client")
					}
				}
				killed := time.Now()
				server.Kill()
				env, ok := <-got
				require.True(t, ok, "the client took a result")
				t.Logf("the client had its result %v after the kill", time.Since(killed))
				assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
				assert.Equal(t, envelope.SeverityCritical, env.Severity, "the call reached the server: it may have run")
				assert.Contains(t, env.Recovery, "may have run")
				assert.False(t, env.HasRetryAfter(), "no retry_after for a call that may have run")
				if srv.stateful {
					assert.Equal(t, before+1, mcpMetrics(t, gw.AdminURL)[refused], "the gateway tried to resume the stream, on a server that was gone")
				}
			})
		}
	}
}
