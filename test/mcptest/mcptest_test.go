package mcptest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

var demoTools = []string{"add", "count", "echo", "slow"}

func TestGoClientAgainstDemoServer(t *testing.T) {
	url := mcptest.StartDemoServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	progress := make(chan *mcp.ProgressNotificationParams, 100)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{}}, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, cs.Close()) }()
	t.Logf("Go client: session id %q, protocol %q", cs.ID(), cs.InitializeResult().ProtocolVersion)

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	assert.Equal(t, demoTools, names)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, "hi", mcptest.TextOf(t, res))

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3.5}})
	require.NoError(t, err)
	assert.Equal(t, "5.5", mcptest.TextOf(t, res))
	assert.Equal(t, map[string]any{"sum": 5.5}, res.StructuredContent)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "count",
		Arguments: map[string]any{"to": 3, "interval_ms": 10},
		Meta:      mcp.Meta{"progressToken": "tok-1"},
	})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, "counted to 3", mcptest.TextOf(t, res))
	for i := 1; i <= 3; i++ {
		select {
		case p := <-progress:
			assert.Equal(t, "tok-1", p.ProgressToken)
			assert.Equal(t, float64(i), p.Progress)
			assert.Equal(t, float64(3), p.Total)
		case <-ctx.Done():
			t.Fatalf("progress notification %d not received: %v", i, ctx.Err())
		}
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 1}})
	require.NoError(t, err)
	assert.Equal(t, "done after 1 ms", mcptest.TextOf(t, res))

	// Out-of-range argument: rejected by schema validation.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"to": 0}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	t.Logf("Go client, count to=0: %s", jsonString(res))

	// Unknown tool.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
	t.Logf("Go client, unknown tool: res=%s err=%v", jsonString(res), err)
	var werr *jsonrpc.Error
	require.ErrorAs(t, err, &werr)
	assert.EqualValues(t, jsonrpc.CodeInvalidParams, werr.Code)
	assert.Equal(t, `unknown tool "nope"`, werr.Message)
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

func TestTSClientAgainstDemoServer(t *testing.T) {
	url := mcptest.StartDemoServer(t)
	countStep := mcptest.CallToolStep("count", map[string]any{"to": 3, "interval_ms": 10})
	countStep.Progress = true
	out := mcptest.RunTSClient(t, mcptest.TSScript{
		URL: url,
		Steps: []mcptest.TSStep{
			mcptest.ListToolsStep(),
			mcptest.CallToolStep("echo", map[string]any{"text": "hi"}),
			mcptest.CallToolStep("add", map[string]any{"a": 2, "b": 3.5}),
			countStep,
			mcptest.CallToolStep("nope", map[string]any{}),
			mcptest.RequestStep("tools/list", map[string]any{}),
			mcptest.RequestStep("no/such/method", map[string]any{}),
			mcptest.ParallelStep(
				mcptest.CallToolStep("slow", map[string]any{"ms": 20}),
				mcptest.CallToolStep("slow", map[string]any{"ms": 10}),
			),
			mcptest.CallToolStep("count", map[string]any{"to": 0}),
		},
	})
	t.Logf("TS client session: %s", jsonString(out.Session))
	for i, r := range out.Results {
		t.Logf("TS step %d: %s", i, jsonString(r))
	}
	require.Len(t, out.Results, 9)
	assert.Equal(t, "2025-11-25", out.Session.ProtocolVersion)
	assert.NotEmpty(t, out.Session.SessionID)
	require.NotNil(t, out.Session.ServerVersion)
	assert.Equal(t, "caddy-mcp-demo", out.Session.ServerVersion.Name)
	// The only transport error is the HTTP 400 of the unknown method (step 6),
	// which the SDK reports both via onerror and by rejecting the request.
	require.Len(t, out.TransportErrors, 1, "%v", out.TransportErrors)
	assert.Equal(t, 400, out.TransportErrors[0].IntCode())

	// listTools
	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, out.Results[0].Decode(&tools))
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	assert.Equal(t, demoTools, names)

	// echo
	assert.Equal(t, "hi", out.Results[1].Text())
	assert.Empty(t, out.Results[1].Progress)

	// add
	addRes := out.Results[2].CallToolResult(t)
	assert.Equal(t, map[string]any{"sum": 5.5}, addRes.StructuredContent)
	assert.Equal(t, "5.5", out.Results[2].Text())

	// count with progress
	require.True(t, out.Results[3].OK, "%v", out.Results[3].Error)
	assert.Equal(t, "counted to 3", out.Results[3].Text())
	assert.Equal(t, []mcptest.TSProgress{
		{Progress: 1, Total: 3, Message: "step 1/3"},
		{Progress: 2, Total: 3, Message: "step 2/3"},
		{Progress: 3, Total: 3, Message: "step 3/3"},
	}, out.Results[3].Progress)

	// unknown tool
	unknown := out.Results[4]
	require.False(t, unknown.OK)
	assert.Equal(t, "McpError", unknown.Error.Name)
	assert.Equal(t, -32602, unknown.Error.IntCode())

	// raw request
	require.NoError(t, out.Results[5].Decode(&tools))
	assert.Len(t, tools.Tools, 4)

	// unknown method: the Go SDK's HTTP handler rejects it with HTTP 400
	// ("JSON RPC not handled") instead of a JSON-RPC -32601 error.
	require.False(t, out.Results[6].OK)
	assert.Equal(t, "StreamableHTTPError", out.Results[6].Error.Type)
	assert.Equal(t, 400, out.Results[6].Error.IntCode())

	// parallel
	var par struct {
		Results []mcptest.TSResult `json:"results"`
	}
	require.NoError(t, out.Results[7].Decode(&par))
	require.Len(t, par.Results, 2)
	assert.Equal(t, "done after 20 ms", par.Results[0].Text())
	assert.Equal(t, "done after 10 ms", par.Results[1].Text())

	// invalid arguments: a tool error (isError), not a JSON-RPC error
	bad := out.Results[8].CallToolResult(t)
	assert.True(t, bad.IsError)
	assert.Contains(t, out.Results[8].Text(), "minimum")
}

func TestTSClientConnectError(t *testing.T) {
	addr := mcptest.FreeLoopbackAddr(t) // nothing listens there
	out, err := mcptest.TryRunTSClient(t, mcptest.TSScript{URL: "http://" + addr + "/mcp"})
	require.ErrorIs(t, err, mcptest.ErrTSConnect)
	require.NotNil(t, out.ConnectError)
	t.Logf("connect error: %v", out.ConnectError)
}

func TestTLS(t *testing.T) {
	url, caFile := mcptest.ServeMCPTLS(t, demoserver.Handler())
	echo := mcptest.CallToolStep("echo", map[string]any{"text": "tls"})

	t.Run("go client with CA pool", func(t *testing.T) {
		client := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
			Endpoint:   url,
			HTTPClient: mcptest.HTTPClientWithRoots(t, mcptest.CertPoolFromPEMFile(t, caFile)),
		}, nil)
		require.NoError(t, err)
		defer func() { assert.NoError(t, cs.Close()) }()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "tls"}})
		require.NoError(t, err)
		assert.Equal(t, "tls", mcptest.TextOf(t, res))
	})
	t.Run("ts client caFile", func(t *testing.T) {
		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: url, CAFile: caFile, Steps: []mcptest.TSStep{echo}})
		require.Len(t, out.Results, 1)
		assert.Equal(t, "tls", out.Results[0].Text())
	})
	t.Run("ts client insecure", func(t *testing.T) {
		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: url, Insecure: true, Steps: []mcptest.TSStep{echo}})
		require.Len(t, out.Results, 1)
		assert.Equal(t, "tls", out.Results[0].Text())
	})
	t.Run("ts client rejects unknown CA", func(t *testing.T) {
		out, err := mcptest.TryRunTSClient(t, mcptest.TSScript{URL: url, Steps: []mcptest.TSStep{echo}})
		require.ErrorIs(t, err, mcptest.ErrTSConnect)
		t.Logf("connect error: %v", out.ConnectError)
	})
}
