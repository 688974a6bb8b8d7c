package test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// gatewayInFront starts the demo MCP server and a gateway in front of it with
// the given mcp block, and returns the gateway's MCP endpoint over HTTP.
func gatewayInFront(t *testing.T, mcpBlock string) (*mcptest.Gateway, string) {
	t.Helper()
	upstream := mcptest.StartDemoServer(t)
	g := mcptest.StartGateway(t, mcpBlock+"\n"+mcptest.ProxyTo(upstream))
	return g, g.URL + mcptest.MCPPath
}

func connectGo(t *testing.T, endpoint string, client *http.Client) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "caddy-mcp-test", Version: "0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

const oneCallPerHour = `mcp {
	rate_limit per_client {
		rate 1/1h
	}
}`

func TestGoClientGetsRateLimitedResultInsteadOfError(t *testing.T) {
	_, endpoint := gatewayInFront(t, oneCallPerHour)
	cs := connectGo(t, endpoint, &http.Client{})
	ctx := t.Context()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, "hi", mcptest.TextOf(t, res))

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}})
	require.NoError(t, err, "a rate-limited call must come back as a result, not an error")
	assert.True(t, res.IsError)
	env, err := envelope.Parse(mcptest.TextOf(t, res))
	require.NoError(t, err)
	assert.Equal(t, envelope.RateLimited, env.Code)
	assert.Equal(t, envelope.SeverityError, env.Severity)
	assert.Equal(t, "Rate limit exceeded: 1 call per 1h for this client", env.Message)
	assert.InDelta(t, 3600, env.RetryAfter, 1)

	// tools/list is not limited by default, and the session is alive.
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, tools.Tools, 4)
}

func TestTypeScriptClientGetsRateLimitedResultInsteadOfThrowing(t *testing.T) {
	_, endpoint := gatewayInFront(t, oneCallPerHour)
	out := mcptest.RunTSClient(t, mcptest.TSScript{
		URL: endpoint,
		Steps: []mcptest.TSStep{
			mcptest.CallToolStep("echo", map[string]any{"text": "hi"}),
			mcptest.CallToolStep("echo", map[string]any{"text": "again"}),
			mcptest.ListToolsStep(),
		},
	})
	require.Len(t, out.Results, 3)
	require.True(t, out.Results[0].OK, "first call: %+v", out.Results[0].Error)
	assert.Equal(t, "hi", out.Results[0].Text())

	second := out.Results[1]
	require.True(t, second.OK, "a rate-limited call must not throw: %+v", second.Error)
	res := second.CallToolResult(t)
	assert.True(t, res.IsError)
	env, err := envelope.Parse(mcptest.TextOf(t, res))
	require.NoError(t, err)
	assert.Equal(t, envelope.RateLimited, env.Code)
	assert.InDelta(t, 3600, env.RetryAfter, 1)

	assert.True(t, out.Results[2].OK, "the session survives: %+v", out.Results[2].Error)
}

func TestRateLimitedIDsComeBackWithTheirJSONType(t *testing.T) {
	_, endpoint := gatewayInFront(t, `mcp {
	rate_limit none_left {
		rate 1/1h
		burst 1
		methods tools/call tools/list ping
	}
}`)
	// Spend the only token.
	post(t, endpoint, `{"jsonrpc":"2.0","id":0,"method":"ping"}`)

	for _, id := range []string{`"req-7"`, `12345678901234567890123`, `-4`, `"\u00e9\"quoted\""`} {
		resp, body := post(t, endpoint, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "3600", resp.Header.Get("Retry-After"))
		assert.Contains(t, string(body), `"id":`+id+`,`, "id %s must come back byte for byte", id)

		resp, body = post(t, endpoint, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		rpc := decodeReply(t, body)
		assert.Equal(t, id, string(rpc.ID))
		if assert.NotNil(t, rpc.Error, "%s", body) {
			assert.Equal(t, envelope.CodeServerError, rpc.Error.Code)
			assert.Equal(t, "RATE_LIMITED", rpc.Error.Data.Code)
			if assert.NotNil(t, rpc.Error.Data.RetryAfter, "retryAfter") {
				assert.Equal(t, float64(3600), *rpc.Error.Data.RetryAfter)
			}
		}
	}

	resp, body := post(t, endpoint, `{"jsonrpc":"2.0","method":"ping"}`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a notification has no id to answer: %s", body)
	assert.NotContains(t, string(body), `"id"`)
}

func TestNormalStreamedAndListCallsBehaveAsWithoutGateway(t *testing.T) {
	direct := mcptest.StartDemoServer(t)
	g := mcptest.StartGateway(t, "mcp {\n\trate_limit generous {\n\t\trate 1000/s\n\t}\n}\n"+mcptest.ProxyTo(direct))

	for name, endpoint := range map[string]string{"direct": direct, "http": g.URL + mcptest.MCPPath} {
		t.Run(name, func(t *testing.T) {
			progress := make(chan *mcp.ProgressNotificationParams, 10)
			c := mcp.NewClient(&mcp.Implementation{Name: "caddy-mcp-test", Version: "0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params
				},
			})
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{}}, nil)
			require.NoError(t, err)
			defer cs.Close()

			tools, err := cs.ListTools(t.Context(), nil)
			require.NoError(t, err)
			assert.Len(t, tools.Tools, 4)

			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3.5}})
			require.NoError(t, err)
			assert.Equal(t, "5.5", mcptest.TextOf(t, res))

			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{
				Name: "count", Arguments: map[string]any{"to": 3, "interval_ms": 1}, Meta: mcp.Meta{"progressToken": "p"},
			})
			require.NoError(t, err)
			assert.Equal(t, "counted to 3", mcptest.TextOf(t, res))
			for i := 1; i <= 3; i++ {
				select {
				case p := <-progress:
					assert.Equal(t, float64(i), p.Progress)
				case <-time.After(10 * time.Second):
					t.Fatalf("progress %d never arrived", i)
				}
			}
		})
	}
}

func TestHTTPSWithInternalCA(t *testing.T) {
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Site:  oneCallPerHour + "\n" + mcptest.ProxyTo(mcptest.StartDemoServer(t)),
		HTTPS: true,
	})
	cs := connectGo(t, g.HTTPSURL+mcptest.MCPPath, g.HTTPSClient(t))
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over tls"}})
	require.NoError(t, err)
	assert.Equal(t, "over tls", mcptest.TextOf(t, res))
}
