package mcptest

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The client's side of results kept whole (results { page }): the call
// answered with a warning, a preview and a link, and the pages read on
// with resources/read, each checked as it arrives.

// CallDump calls StartTextServer's dump {n} through cs.
func CallDump(t testing.TB, cs *mcp.ClientSession, n int) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "dump", Arguments: map[string]any{"n": n}})
	if err != nil {
		t.Fatalf("mcptest: dump %d: %v", n, err)
	}
	return res
}

// nextDetail is the detail of a RESULT_TRUNCATED warning that names where
// to read on.
var nextDetail = regexp.MustCompile(`<detail key="next">(caddymcp://results/[^<]+)</detail>`)

// Paged checks that res is the answer of a result kept whole (results {
// page }): not an error, and three blocks, the RESULT_TRUNCATED warning,
// the preview and a resource_link. It returns the preview, the link, and
// the URI the warning says to read on from.
func Paged(t testing.TB, res *mcp.CallToolResult) (preview string, link *mcp.ResourceLink, next string) {
	t.Helper()
	if res.IsError || len(res.Content) != 3 {
		t.Fatalf("mcptest: want a warning, a preview and a link, not an error; got isError %v and %d blocks", res.IsError, len(res.Content))
	}
	warning, ok := res.Content[0].(*mcp.TextContent)
	if !ok || !strings.Contains(warning.Text, `<tool_error code="RESULT_TRUNCATED" severity="warning">`) {
		t.Fatalf("mcptest: the first block is not the RESULT_TRUNCATED warning: %#v", res.Content[0])
	}
	m := nextDetail.FindStringSubmatch(warning.Text)
	if m == nil {
		t.Fatalf("mcptest: the warning names no page to read on from: %s", warning.Text)
	}
	text, ok := res.Content[1].(*mcp.TextContent)
	if !ok {
		t.Fatalf("mcptest: the second block is not the preview's text: %T", res.Content[1])
	}
	link, ok = res.Content[2].(*mcp.ResourceLink)
	if !ok {
		t.Fatalf("mcptest: the third block is not a resource_link: %T", res.Content[2])
	}
	return text.Text, link, m[1]
}

// ReadPages reads from uri to the last page with cs, following each
// page's _meta "caddymcp.dev/next", calling before(i) before page i (to
// steer it; nil: nothing), and returns the text read and the pages' URIs.
// It fails t unless each page is one text/plain content naming its own
// URI, within budget bytes, beginning where the last ended and saying so
// ("caddymcp.dev/from"), and not empty when another follows.
func ReadPages(t testing.TB, cs *mcp.ClientSession, uri string, budget int, before func(i int)) (string, []string) {
	t.Helper()
	var text strings.Builder
	var uris []string
	start := PageOffset(t, uri)
	for uri != "" {
		if before != nil {
			before(len(uris))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		cancel()
		if err != nil {
			t.Fatalf("mcptest: page %d, %s: %v", len(uris), uri, err)
		}
		if len(res.Contents) != 1 {
			t.Fatalf("mcptest: page %d has %d contents, want 1", len(uris), len(res.Contents))
		}
		c := res.Contents[0]
		from := PageOffset(t, uri)
		switch next, _ := res.Meta["caddymcp.dev/next"].(string); {
		case c.URI != uri || c.MIMEType != "text/plain":
			t.Fatalf("mcptest: page %d is %q (%s), want %q (text/plain)", len(uris), c.URI, c.MIMEType, uri)
		case len(c.Text) > budget:
			t.Fatalf("mcptest: page %d is %d bytes, over the budget of %d", len(uris), len(c.Text), budget)
		case from != start+text.Len() || res.Meta["caddymcp.dev/from"] != float64(from):
			t.Fatalf("mcptest: page %d begins at %d (it says %v), where the last ended: %d", len(uris), from, res.Meta["caddymcp.dev/from"], start+text.Len())
		case next != "" && c.Text == "":
			t.Fatalf("mcptest: page %d is empty, and names a next one", len(uris))
		default:
			text.WriteString(c.Text)
			uris = append(uris, uri)
			uri = next
		}
	}
	return text.String(), uris
}

// PageOffset is the offset a page's URI names (0 with none).
func PageOffset(t testing.TB, uri string) int {
	t.Helper()
	_, v, ok := strings.Cut(uri, "?from=")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("mcptest: %s: %v", uri, err)
	}
	return n
}

// PageNotFound reads uri with cs, fails t unless it is refused NOT_FOUND
// (-32000), and returns the error's message and data, which a test
// compares with another link's.
func PageNotFound(t testing.TB, cs *mcp.ClientSession, uri string) (message, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32000 || !strings.Contains(string(rpcErr.Data), `"code":"NOT_FOUND"`) {
		t.Fatalf("mcptest: reading %s: want NOT_FOUND, got %v", uri, err)
	}
	return rpcErr.Message, string(rpcErr.Data)
}
