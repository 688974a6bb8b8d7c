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

// Results cut to their budget (truncate), in front of the Go SDK server of
// results_test.go.

// cutOf is the cut result in body (JSON, or an event stream's last event):
// its warning, the texts after it, and isError.
func cutOf(t *testing.T, body []byte) (warning envelope.Parsed, texts []string, isError bool) {
	t.Helper()
	content, isError := contentOf(t, body)
	require.NotEmpty(t, content)
	warning, err := envelope.Parse(content[0].Text)
	require.NoError(t, err, content[0].Text)
	for _, c := range content[1:] {
		require.Equal(t, "text", c.Type)
		texts = append(texts, c.Text)
	}
	return warning, texts, isError
}

func TestAResultOverItsBudgetIsCutToFitWhenTheToolTruncates(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprint("sse=", sse), func(t *testing.T) {
			endpoint := budgeted(t, sse, "max 8KiB\n\t\ttruncate big failing")
			resp, body := post(t, endpoint, bigCall(3000, sse))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			text, _ := resultOf(t, body)
			assert.Len(t, text, 3000, "under its budget: as the server wrote it")

			resp, body = post(t, endpoint, bigCall(20000, sse))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			if sse {
				assert.Contains(t, string(body), "notifications/progress", "progress passes")
			}
			warning, texts, isError := cutOf(t, body)
			assert.Equal(t, envelope.Code("RESULT_TRUNCATED"), warning.Code)
			assert.Equal(t, envelope.SeverityWarning, warning.Severity)
			assert.Contains(t, warning.Message, "The result of the tool big was cut to fit its budget of 8192 bytes")
			assert.False(t, isError, "as the server said")
			require.Equal(t, 1, len(texts))
			assert.Greater(t, len(texts[0]), 6000, "what fits is kept")
			assert.Equal(t, strings.Repeat("x", len(texts[0])), texts[0])
			assert.LessOrEqual(t, len(lastMessage(body)), 8192, "the answer fits the budget")

			_, body = post(t, endpoint, sizedCall("failing", 20000, false))
			_, _, isError = cutOf(t, body)
			assert.True(t, isError, "a tool's error stays one once cut")
		})
	}
}

// The clients read a cut result as the call's result: the model is told,
// nothing throws.
func TestTheClientsAcceptACutResult(t *testing.T) {
	t.Run("go", func(t *testing.T) {
		endpoint := budgeted(t, true, "max 4KiB\n\t\ttruncate")
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		require.NoError(t, err)
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"n": 50000}})
		require.NoError(t, err)
		assert.False(t, res.IsError)
		require.Len(t, res.Content, 2)
		assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `code="RESULT_TRUNCATED" severity="warning"`)
	})
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprint("typescript, sse=", sse), func(t *testing.T) {
			endpoint := budgeted(t, sse, "max 4KiB\n\t\ttruncate")
			step := mcptest.CallToolStep("big", map[string]any{"n": 50000})
			step.Progress = sse
			out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{mcptest.ListToolsStep(), step}})
			require.Len(t, out.Results, 2)
			r := out.Results[1]
			require.True(t, r.OK, "%+v", r.Error)
			assert.Contains(t, string(r.Result), `RESULT_TRUNCATED`)
			assert.Contains(t, string(r.Result), `"isError":false`)
			assert.Empty(t, out.TransportErrors)
		})
	}
}

// An image, and a result with structuredContent, are never cut: over the
// budget, they are refused whole.
func TestWhatCannotBeCutIsRefusedWhole(t *testing.T) {
	endpoint := budgeted(t, false, "max 8KiB\n\t\ttruncate")
	for tool, n := range map[string]int{"picture": 10000, "table": 1000} {
		_, body := post(t, endpoint, sizedCall(tool, n, false))
		text, isError := resultOf(t, body)
		assert.True(t, isError, tool)
		assert.Contains(t, text, `code="RESULT_TOO_LARGE"`, tool)
	}
}

// An event larger than the 1 MiB the gateway holds of one by default is
// held to a budget larger than that, not refused for the gateway's bound.
func TestABudgetOverAMebibyteHoldsEventsThatLarge(t *testing.T) {
	endpoint := budgeted(t, true, "max 4MiB")
	_, body := post(t, endpoint, bigCall(3<<20, true))
	text, isError := resultOf(t, body)
	assert.False(t, isError)
	assert.Len(t, text, 3<<20, "under its budget of 4 MiB: as the server wrote it")

	_, body = post(t, endpoint, bigCall(5<<20, true))
	text, isError = resultOf(t, body)
	assert.True(t, isError)
	assert.Contains(t, text, "larger than its budget of 4194304 bytes")
}

// With the tool's schema learned from the list, the words name the
// arguments the model pages or limits it with.
func TestTheWordsNameTheToolsPagingArguments(t *testing.T) {
	endpoint := budgeted(t, false, "max 8KiB")
	_, body := post(t, endpoint, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	require.Contains(t, string(body), `"search"`)
	_, body = post(t, endpoint, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search","arguments":{"query":"a"}}}`)
	text, isError := resultOf(t, body)
	assert.True(t, isError)
	env, err := envelope.Parse(text)
	require.NoError(t, err)
	assert.Contains(t, env.Recovery, "use its arguments cursor, limit (fewer items, or the next page)")
}

// Beside the tool policy, whose hook on a call reads more of its answer
// than the budget (to add a deprecated tool's warning), a result over its
// budget is still refused or cut: the budget's hook is given what the core
// holds for the other. A cut result gets the warning after the cut, past
// the budget by its length; a refusal gets none (it is no success).
func TestABudgetHoldsBesideTheToolPolicy(t *testing.T) {
	for _, c := range []struct {
		budget, code string
		deprecated   bool
	}{
		{"max 8KiB", "RESULT_TOO_LARGE", false},
		{"max 8KiB\n\t\ttruncate", "RESULT_TRUNCATED", true},
	} {
		t.Run(c.code, func(t *testing.T) {
			// The results block is closed, and a tools block opened, in
			// the lines budgeted writes into it.
			endpoint := budgeted(t, false, c.budget+"\n\t}\n\ttools {\n\t\tdeprecate big \"Use small instead\"")
			_, body := post(t, endpoint, bigCall(200_000, false))
			assert.Contains(t, string(body), c.code)
			assert.Equal(t, c.deprecated, strings.Contains(string(body), "DEPRECATED"))
			assert.Less(t, len(body), 8192+1024, "the budget and the warning")
		})
	}
}
