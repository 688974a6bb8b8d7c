package test

import (
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

// Results held to a budget, in front of a server written with the official
// TypeScript SDK (test/tsclient/server.mjs), which writes its answers its own
// way: the result before "jsonrpc" and "id", each event of a stream named
// "message". See results_test.go for the same budgets before the Go SDK's.

// tsBudget holds every result to 8 KiB, and those of the tool paged, which
// has paging arguments, to 4 KiB.
const tsBudget = "max paged 4KiB\n\t\tmax 8KiB"

// tsBudgeted starts the TypeScript SDK server (JSON answers, or event
// streams when sse) and a gateway holding its results to budget; it returns
// the server's endpoint and the gateway's.
func tsBudgeted(t *testing.T, sse bool, budget string) (server, gateway string) {
	t.Helper()
	server = mcptest.StartTSServer(t, !sse)
	return server, holdResults(t, server, budget)
}

// forEachAnswerKind runs test as a subtest with a server answering in JSON,
// then with one answering in event streams.
func forEachAnswerKind(t *testing.T, test func(t *testing.T, sse bool)) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprint("sse=", sse), func(t *testing.T) { test(t, sse) })
	}
}

func TestATSServersResultUnderItsBudgetPassesAsTheServerWroteIt(t *testing.T) {
	forEachAnswerKind(t, func(t *testing.T, sse bool) {
		server, endpoint := tsBudgeted(t, sse, tsBudget)
		for _, call := range []string{
			bigCall(3000, sse),
			sizedCall("failing", 3000, false),
			sizedCall("picture", 1000, false),
			sizedCall("table", 20, false),
			toolCall("blocks", `{"n":2000,"count":3}`, false),
		} {
			_, direct := post(t, server, call)
			require.Contains(t, string(direct), `{"result":{"content":[`, "the server answered %s", call)
			resp, body := post(t, endpoint, call)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, string(direct), string(body), "byte for byte: %s", call)
		}
	})
}

// Over its budget, a result is refused whole, whatever it holds: texts
// (one, or several the budget falls between), an image, structuredContent,
// or the server's own failure.
func TestATSServersResultOverItsBudgetIsRefusedWhole(t *testing.T) {
	forEachAnswerKind(t, func(t *testing.T, sse bool) {
		_, endpoint := tsBudgeted(t, sse, tsBudget)
		for _, c := range []struct {
			tool, call string
			budget     int
			// absent is a mark of the result that must not reach the client.
			absent string
		}{
			{"big", bigCall(9000, sse), 8192, "xxxxxxxx"},
			{"failing", sizedCall("failing", 9000, false), 8192, "xxxxxxxx"},
			{"blocks", toolCall("blocks", `{"n":3000,"count":3}`, false), 8192, "xxxxxxxx"},
			{"picture", sizedCall("picture", 10000, false), 8192, `"image"`},
			{"table", sizedCall("table", 1000, false), 8192, `"structuredContent"`},
			{"paged", toolCall("paged", `{"query":"q"}`, false), 4096, "xxxxxxxx"},
		} {
			resp, body := post(t, endpoint, c.call)
			require.Equal(t, http.StatusOK, resp.StatusCode, c.tool)
			text, isError := resultOf(t, body)
			assert.True(t, isError, c.tool)
			env, err := envelope.Parse(text)
			require.NoError(t, err, text)
			assert.Equal(t, envelope.Code("RESULT_TOO_LARGE"), env.Code, c.tool)
			assert.Contains(t, env.Message, "The result of the tool "+c.tool+" is too large")
			assert.Contains(t, env.Message, fmt.Sprintf("its budget of %d bytes", c.budget))
			assert.Contains(t, env.Recovery, "paging or filter arguments")
			assert.NotContains(t, string(body), c.absent, "%s: nothing of the result reaches the client", c.tool)
			if sse && c.tool == "big" {
				progress := strings.Index(string(body), "notifications/progress")
				assert.True(t, progress >= 0 && progress < strings.Index(string(body), "RESULT_TOO_LARGE"),
					"the progress passes, before the refusal: %.600s", body)
			}
		}
	})
}

// overBudgetCalls are calls of every kind of the TypeScript server's tools
// whose results are over tsBudget.
var overBudgetCalls = []struct {
	tool string
	args map[string]any
}{
	{"big", map[string]any{"n": 9000}},
	{"failing", map[string]any{"n": 9000}},
	{"blocks", map[string]any{"n": 3000, "count": 3}},
	{"picture", map[string]any{"n": 10000}},
	{"table", map[string]any{"n": 1000}},
}

// The TypeScript SDK's client takes each refusal as the call's result, the
// table's too: it knows the tool's outputSchema from tools/list, and a
// result with isError needs no structuredContent.
func TestTheTypeScriptClientAcceptsATSServersRefusals(t *testing.T) {
	forEachAnswerKind(t, func(t *testing.T, sse bool) {
		_, endpoint := tsBudgeted(t, sse, tsBudget)
		steps := []mcptest.TSStep{mcptest.ListToolsStep()}
		for _, c := range overBudgetCalls {
			step := mcptest.CallToolStep(c.tool, c.args)
			step.Progress = sse && c.tool == "big"
			steps = append(steps, step)
		}
		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: steps})
		require.Len(t, out.Results, len(steps))
		require.True(t, out.Results[0].OK, "%v", out.Results[0].Error)
		assert.Contains(t, string(out.Results[0].Result), `"outputSchema"`, "the client knows the table's outputSchema")
		for i, c := range overBudgetCalls {
			r := out.Results[i+1]
			require.True(t, r.OK, "%s: %v", c.tool, r.Error)
			assert.Contains(t, r.Text(), `code="RESULT_TOO_LARGE"`, c.tool)
			assert.True(t, r.CallToolResult(t).IsError, c.tool)
			if step := steps[i+1]; step.Progress {
				assert.Len(t, r.Progress, 1, "progress passed before the refusal")
			}
		}
		assert.Empty(t, out.TransportErrors)
	})
}

// The Go SDK's client takes each refusal as the call's result.
func TestTheGoSDKClientAcceptsATSServersRefusals(t *testing.T) {
	forEachAnswerKind(t, func(t *testing.T, sse bool) {
		_, endpoint := tsBudgeted(t, sse, tsBudget)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		require.NoError(t, err)
		defer cs.Close()
		_, err = cs.ListTools(t.Context(), nil)
		require.NoError(t, err)
		for _, c := range overBudgetCalls {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			require.NoError(t, err, c.tool)
			assert.True(t, res.IsError, c.tool)
			assert.Contains(t, mcptest.TextOf(t, res), `code="RESULT_TOO_LARGE"`, c.tool)
			assert.Nil(t, res.StructuredContent, c.tool)
		}
	})
}

// Cut to its budget, a TypeScript SDK server's result keeps the blocks that
// fit, the start of the text that does not, and isError as the server said
// it (written after the content); the TypeScript client reads it.
func TestATSServersResultIsCutToFitWhenTheToolTruncates(t *testing.T) {
	forEachAnswerKind(t, func(t *testing.T, sse bool) {
		_, endpoint := tsBudgeted(t, sse, "max 8KiB\n\t\ttruncate")
		_, body := post(t, endpoint, bigCall(20000, sse))
		if sse {
			assert.Contains(t, string(body), "notifications/progress", "progress passes")
		}
		warning, texts, isError := cutOf(t, body)
		assert.Equal(t, envelope.Code("RESULT_TRUNCATED"), warning.Code)
		assert.False(t, isError)
		require.Equal(t, 1, len(texts))
		assert.Greater(t, len(texts[0]), 6000)

		_, body = post(t, endpoint, sizedCall("failing", 20000, false))
		_, _, isError = cutOf(t, body)
		assert.True(t, isError, "the server's isError, read past the cut")

		_, body = post(t, endpoint, toolCall("blocks", `{"n":4000,"count":3}`, false))
		warning, texts, _ = cutOf(t, body)
		require.Equal(t, 2, len(texts), "the first block whole, the second cut, the third dropped")
		assert.Equal(t, 4000, len(texts[0]))
		assert.Less(t, len(texts[1]), 4000)
		assert.Contains(t, warning.Message, "1 more content block was left out")

		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
			mcptest.ListToolsStep(), mcptest.CallToolStep("big", map[string]any{"n": 20000}), mcptest.CallToolStep("table", map[string]any{"n": 1000}),
		}})
		require.Len(t, out.Results, 3)
		for _, r := range out.Results {
			require.True(t, r.OK, "%+v", r.Error)
		}
		assert.Contains(t, string(out.Results[1].Result), "RESULT_TRUNCATED")
		assert.Contains(t, string(out.Results[2].Result), "RESULT_TOO_LARGE", "structuredContent is never cut")
	})
}
