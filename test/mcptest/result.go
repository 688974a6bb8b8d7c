package mcptest

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TextOf is the text of a tool result that holds exactly one content, a
// text; anything else fails the test.
func TextOf(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("mcptest: the result has %d contents, not 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("mcptest: content is %T", res.Content[0])
	}
	return tc.Text
}
