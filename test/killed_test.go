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
// (client: "go" or "ts"), asking for progress, and sends the envelope of
// the result it takes, or fails the test if it takes none.
type clientCall func(t *testing.T, endpoint string, got chan<- envelope.Parsed)

var killedClients = map[string]clientCall{
	"go": func(t *testing.T, endpoint string, got chan<- envelope.Parsed) {
		session, err := mcp.NewClient(&mcp.Implementation{Name: "killed", Version: "0"}, nil).
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
	"ts": func(t *testing.T, endpoint string, got chan<- envelope.Parsed) {
		step := mcptest.CallToolStep("work", map[string]any{})
		step.Progress, step.TimeoutMS = true, 30000
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

func TestAServerKilledMidCallIsToldAsACallThatMayHaveRun(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for _, sse := range []bool{false, true} {
		for name, call := range killedClients {
			t.Run(fmt.Sprintf("sse=%v,client=%s", sse, name), func(t *testing.T) {
				server := mcptest.StartKillable(t, mcptest.KillableGo{Bin: bin, SSE: sse})
				gw := mcptest.StartGateway(t, "mcp\n"+mcptest.ProxyTo(server.URL))
				got := make(chan envelope.Parsed, 1)
				go call(t, gw.URL+mcptest.MCPPath, got)
				select {
				case <-server.Called:
				case <-time.After(30 * time.Second):
					t.Fatal("the call never reached the server")
				}
				server.Kill()
				env, ok := <-got
				require.True(t, ok, "the client took a result")
				assert.Equal(t, envelope.HandoffUpstreamUnavailable, env.Code)
				assert.Equal(t, envelope.SeverityCritical, env.Severity, "the call reached the server: it may have run")
				assert.Contains(t, env.Recovery, "may have run")
				assert.False(t, env.HasRetryAfter(), "no retry_after for a call that may have run")
			})
		}
	}
}
