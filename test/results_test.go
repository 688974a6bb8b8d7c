package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Results held to a budget, in front of an official Go SDK server whose
// tool "big" answers n bytes of text, after a progress notification when
// asked for one.

type bigArgs struct {
	N int `json:"n"`
}

// searchArgs are a tool's arguments, two of which page.
type searchArgs struct {
	Query  string `json:"query"`
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// budgeted starts the Go SDK server (stateless; JSON answers, or event
// streams when sse) and a gateway holding results to budget bytes.
func budgeted(t *testing.T, sse bool, budget string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "picture"}, func(_ context.Context, _ *mcp.CallToolRequest, in bigArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, in.N)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "table"}, func(_ context.Context, _ *mcp.CallToolRequest, in bigArgs) (*mcp.CallToolResult, any, error) {
		rows := make([]map[string]int, in.N)
		for i := range rows {
			rows[i] = map[string]int{"row": i}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a table"}}, StructuredContent: map[string]any{"rows": rows}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "failing"}, func(_ context.Context, _ *mcp.CallToolRequest, in bigArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.N)}}, IsError: true}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "search"}, func(_ context.Context, _ *mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 20000)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(ctx context.Context, req *mcp.CallToolRequest, in bigArgs) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.N)}}}, nil, nil
	})
	upstream := mcptest.ServeMCP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: !sse}))
	return holdResults(t, upstream, budget)
}

// holdResults starts a gateway in front of upstream holding results to
// budget (the lines of a results block) and returns its endpoint.
func holdResults(t *testing.T, upstream, budget string) string {
	t.Helper()
	gw := mcptest.StartGateway(t, "mcp {\n\tresults {\n\t\t"+budget+"\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	return gw.URL + mcptest.MCPPath
}

func bigCall(n int, progress bool) string {
	return sizedCall("big", n, progress)
}

// sizedCall is a tools/call of tool with the arguments {"n": n} and the id
// 4, and the progress token "p" when progress is set.
func sizedCall(tool string, n int, progress bool) string {
	return toolCall(tool, fmt.Sprintf(`{"n":%d}`, n), progress)
}

// toolCall is a tools/call of tool with args (JSON) and the id 4, and the
// progress token "p" when progress is set.
func toolCall(tool, args string, progress bool) string {
	meta := ""
	if progress {
		meta = `,"_meta":{"progressToken":"p"}`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, tool, args, meta)
}

// lastMessage is the JSON answer in body, or the data of an event
// stream's last event.
func lastMessage(body []byte) string {
	s := string(body)
	if i := strings.LastIndex(s, "data: "); i >= 0 {
		s = strings.TrimSpace(s[i+len("data: "):])
	}
	return s
}

// contentBlock is a block of a CallToolResult's content, as the model
// reads it.
type contentBlock struct{ Type, Text string }

// contentOf is the content and isError of the CallToolResult answering id
// 4 in body (JSON, or the data of an event stream's last event).
func contentOf(t *testing.T, body []byte) (content []contentBlock, isError bool) {
	t.Helper()
	s := lastMessage(body)
	var rpc struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Content []contentBlock `json:"content"`
			IsError bool           `json:"isError"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(s), &rpc), "%.300s", s)
	require.Equal(t, "4", string(rpc.ID))
	return rpc.Result.Content, rpc.Result.IsError
}

// resultOf is the text of the one block of the CallToolResult in body.
func resultOf(t *testing.T, body []byte) (text string, isError bool) {
	t.Helper()
	content, isError := contentOf(t, body)
	require.Len(t, content, 1)
	return content[0].Text, isError
}

func TestAResultUnderItsBudgetPassesAndOneOverItIsToldToTheModel(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprint("sse=", sse), func(t *testing.T) {
			endpoint := budgeted(t, sse, "max 10KiB\n\t\tmax b* 4KiB")
			resp, body := post(t, endpoint, bigCall(3000, sse))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			text, isError := resultOf(t, body)
			assert.False(t, isError)
			assert.Len(t, text, 3000, "under its budget: as the server wrote it")

			resp, body = post(t, endpoint, bigCall(5000, sse))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			if sse {
				assert.Contains(t, string(body), "notifications/progress", "progress passes")
			}
			text, isError = resultOf(t, body)
			assert.True(t, isError)
			env, err := envelope.Parse(text)
			require.NoError(t, err, text)
			assert.Equal(t, envelope.Code("RESULT_TOO_LARGE"), env.Code)
			assert.Contains(t, env.Message, "The result of the tool big is too large")
			assert.Contains(t, env.Message, "its budget of 4096 bytes (about 1024 tokens)", "the tool's own rule, not the default")
			assert.Contains(t, env.Recovery, "paging or filter arguments")
		})
	}
}

func TestAHugeResultIsNeverHeldPastItsBudget(t *testing.T) {
	endpoint := budgeted(t, false, "tokens 25000")
	resp, body := post(t, endpoint, bigCall(20<<20, false))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text, isError := resultOf(t, body)
	assert.True(t, isError)
	assert.Contains(t, text, `code="RESULT_TOO_LARGE"`)
	assert.Contains(t, text, "larger than its budget of 100000 bytes (about 25000 tokens); the gateway stopped reading it before its end", "read no further than the budget, and the same number never given twice")
	assert.Less(t, len(body), 4096, "the 20 MB never reached the client")
}

// The Go SDK's client reads the refusal as the call's result: the model
// is told, nothing throws.
func TestTheGoSDKClientGetsTheRefusalAsAResult(t *testing.T) {
	endpoint := budgeted(t, true, "max 1KiB")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"n": 5000}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, mcptest.TextOf(t, res), `code="RESULT_TOO_LARGE"`)
}

// The TypeScript SDK's client accepts the refusal as the call's result (no
// schema error on the changed result), over JSON and an event stream with
// progress before it.
func TestTheTypeScriptClientAcceptsTheRefusal(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprint("sse=", sse), func(t *testing.T) {
			endpoint := budgeted(t, sse, "max 1KiB")
			step := mcptest.CallToolStep("big", map[string]any{"n": 5000})
			step.Progress = sse
			out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{step}})
			require.Len(t, out.Results, 1)
			r := out.Results[0]
			require.True(t, r.OK, "%+v", r.Error)
			assert.Contains(t, r.Text(), `code="RESULT_TOO_LARGE"`)
			assert.Contains(t, string(r.Result), `"isError":true`)
			if sse {
				assert.Len(t, r.Progress, 1, "progress passed before the refusal")
			}
			assert.Empty(t, out.TransportErrors)
		})
	}
}

// An image and structuredContent count as the bytes they take in the
// response: over the budget, the result is refused whole, never cut.
func TestImagesAndStructuredContentCountAsTheirBytes(t *testing.T) {
	endpoint := budgeted(t, false, "max 8KiB")
	for tool, n := range map[string]int{"picture": 1000, "table": 20} {
		resp, body := post(t, endpoint, sizedCall(tool, n, false))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.NotContains(t, string(body), "RESULT_TOO_LARGE", "%s under its budget: as written", tool)
	}
	for tool, n := range map[string]int{"picture": 10000, "table": 1000} {
		_, body := post(t, endpoint, sizedCall(tool, n, false))
		text, isError := resultOf(t, body)
		assert.True(t, isError, tool)
		assert.Contains(t, text, `code="RESULT_TOO_LARGE"`, tool)
		assert.NotContains(t, string(body), `"image"`, "%s: nothing of it reaches the client", tool)
		assert.NotContains(t, string(body), `"structuredContent"`, tool)
	}
}
