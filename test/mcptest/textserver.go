package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TextArgs are the arguments of StartTextServer's tool dump.
type TextArgs struct {
	N int `json:"n"`
}

// StartTextServer serves an official Go SDK server, stateful (it gives an
// Mcp-Session-Id) and answering JSON, whose tool dump {n} answers
// LongText(n) as one text block, and returns its endpoint. It is stopped
// by t.Cleanup (ServeMCP).
func StartTextServer(t testing.TB) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "text", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "dump"}, func(_ context.Context, _ *mcp.CallToolRequest, in TextArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: LongText(in.N)}}}, nil, nil
	})
	return ServeMCP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
}

// LongText is a text of about n bytes (at most n, cut at a character),
// always the same for the same n: numbered lines that hold what a page's
// cut must respect, characters of two and three bytes, and what JSON
// escapes (quotes, backslashes, tabs, control characters).
func LongText(n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%08d é \"日本語\" \\ \t \x01 line of a long result\n", i)
	}
	s := b.String()[:n]
	for len(s) > 0 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1] // a character cut short
	}
	return s
}
