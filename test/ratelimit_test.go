package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// proxyTo is the reverse_proxy line for an upstream URL such as the demo
// server's, keeping its Host as the Go SDK server requires on loopback.
func proxyTo(upstream string) string {
	u, err := url.Parse(upstream)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("reverse_proxy %s {\n\theader_up Host {upstream_hostport}\n}", u.Host)
}

// gatewayInFront starts the demo MCP server and a gateway in front of it with
// the given mcp block, and returns the gateway's MCP endpoint over HTTP.
func gatewayInFront(t *testing.T, mcpBlock string) (*mcptest.Gateway, string) {
	t.Helper()
	upstream := mcptest.StartDemoServer(t)
	g := mcptest.StartGateway(t, mcpBlock+"\n"+proxyTo(upstream))
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

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.Len(t, res.Content, 1)
	tc, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content is %T", res.Content[0])
	return tc.Text
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
	assert.Equal(t, "hi", textOf(t, res))

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}})
	require.NoError(t, err, "a rate-limited call must come back as a result, not an error")
	assert.True(t, res.IsError)
	env, err := envelope.Parse(textOf(t, res))
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
	env, err := envelope.Parse(textOf(t, res))
	require.NoError(t, err)
	assert.Equal(t, envelope.RateLimited, env.Code)
	assert.InDelta(t, 3600, env.RetryAfter, 1)

	assert.True(t, out.Results[2].OK, "the session survives: %+v", out.Results[2].Error)
}

// post sends one raw JSON-RPC POST as a client without a session would.
func post(t *testing.T, endpoint, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
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
		var rpc struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					Code       string  `json:"code"`
					RetryAfter float64 `json:"retryAfter"`
					Envelope   string  `json:"envelope"`
				} `json:"data"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &rpc), "%s", body)
		assert.Equal(t, id, string(rpc.ID))
		assert.Equal(t, envelope.CodeServerError, rpc.Error.Code)
		assert.Equal(t, "RATE_LIMITED", rpc.Error.Data.Code)
		assert.Equal(t, float64(3600), rpc.Error.Data.RetryAfter)
	}

	resp, body := post(t, endpoint, `{"jsonrpc":"2.0","method":"ping"}`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a notification has no id to answer: %s", body)
	assert.NotContains(t, string(body), `"id"`)
}

func TestNormalStreamedAndListCallsBehaveAsWithoutGateway(t *testing.T) {
	direct := mcptest.StartDemoServer(t)
	g := mcptest.StartGateway(t, "mcp {\n\trate_limit generous {\n\t\trate 1000/s\n\t}\n}\n"+proxyTo(direct))

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
			assert.Equal(t, "5.5", textOf(t, res))

			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{
				Name: "count", Arguments: map[string]any{"to": 3, "interval_ms": 1}, Meta: mcp.Meta{"progressToken": "p"},
			})
			require.NoError(t, err)
			assert.Equal(t, "counted to 3", textOf(t, res))
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
		Site:  oneCallPerHour + "\n" + proxyTo(mcptest.StartDemoServer(t)),
		HTTPS: true,
	})
	cs := connectGo(t, g.HTTPSURL+mcptest.MCPPath, g.HTTPSClient(t))
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over tls"}})
	require.NoError(t, err)
	assert.Equal(t, "over tls", textOf(t, res))
}
