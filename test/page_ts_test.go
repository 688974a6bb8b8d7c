package test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Results kept whole, read by the official TypeScript SDK's client
// (test/tsclient/client.mjs, steps readPages and readResource) through a
// real Caddy: see page_test.go for the Go SDK's client.

// tsPages is the result of a readPages step.
type tsPages struct {
	URI    string   `json:"uri"`
	Pages  int      `json:"pages"`
	Bytes  int      `json:"bytes"`
	SHA256 string   `json:"sha256"`
	Size   int      `json:"size"`
	Next   *string  `json:"next"`
	List   []tsPage `json:"list"`
}

// tsPage is one page a readPages step read.
type tsPage struct {
	URI        string `json:"uri"`
	ContentURI string `json:"contentUri"`
	MIMEType   string `json:"mimeType"`
	Contents   int    `json:"contents"`
	From       int    `json:"from"`
	Size       int    `json:"size"`
	Bytes      int    `json:"bytes"`
}

// readPagesStep reads pages as params say (uri, follow, max).
func readPagesStep(params map[string]any) mcptest.TSStep {
	return mcptest.TSStep{Op: "readPages", Params: params}
}

// pagesOf decodes a readPages step's result, which it has also when it
// failed (the pages read before).
func pagesOf(t *testing.T, r mcptest.TSResult) tsPages {
	t.Helper()
	var p tsPages
	require.NoError(t, json.Unmarshal(r.Result, &p), "%s", r.Result)
	return p
}

// tsPagedCall checks the result of a callTool of dump: a warning, a preview
// and a link; it returns the preview, the link and where to read on.
func tsPagedCall(t *testing.T, r mcptest.TSResult) (preview string, link *mcp.ResourceLink, next string) {
	t.Helper()
	require.True(t, r.OK, "%v", r.Error)
	return mcptest.Paged(t, r.CallToolResult(t))
}

// checkPages checks that pages read want from its start, each page
// within the budget and beginning where the last ended, to the end.
func checkPages(t *testing.T, p tsPages, want string, start int) {
	t.Helper()
	at := start
	for i, page := range p.List {
		assert.Equal(t, page.URI, page.ContentURI, "page %d names itself", i)
		assert.Equal(t, "text/plain", page.MIMEType, "page %d", i)
		assert.Equal(t, 1, page.Contents, "page %d", i)
		assert.LessOrEqual(t, page.Bytes, pageBudget, "page %d fits the budget", i)
		require.Equal(t, at, mcptest.PageOffset(t, page.URI), "page %d begins where the last ended", i)
		require.Equal(t, at, page.From, "page %d says where it begins", i)
		assert.Equal(t, len(want), page.Size, "page %d", i)
		if i < len(p.List)-1 {
			assert.Positive(t, page.Bytes, "page %d has a next one: it is not empty", i)
		}
		at += page.Bytes
	}
	sum := sha256.Sum256([]byte(want[start:at]))
	assert.Equal(t, at-start, p.Bytes)
	assert.Equal(t, hex.EncodeToString(sum[:]), p.SHA256, "the pages are want[%d:%d] byte for byte", start, at)
}

// A 20 MiB text result is previewed within the budget, linked, and read
// back page by page by the official TypeScript SDK's client, byte for
// byte; another session reading the link, and a made-up link, get the
// same NOT_FOUND, while the link still reads for its own session.
func TestPageTSClientReassembles(t *testing.T) {
	const n = 20 << 20
	want := mcptest.LongText(n)
	gw := mcptest.StartGateway(t, pageResults+mcptest.ProxyTo(mcptest.StartTextServer(t)))
	endpoint := gw.URL + mcptest.MCPPath

	began := time.Now()
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Timeout: 5 * time.Minute, Steps: []mcptest.TSStep{
		{Op: "callTool", Name: "dump", Arguments: map[string]any{"n": n}, TimeoutMS: 240000},
		readPagesStep(map[string]any{"follow": "next"}),
		readPagesStep(map[string]any{"follow": "link", "max": 2}),
	}})
	took := time.Since(began)
	require.Len(t, out.Results, 3)
	assert.Empty(t, out.TransportErrors)

	preview, link, next := tsPagedCall(t, out.Results[0])
	require.NotEmpty(t, preview)
	assert.Less(t, len(preview), pageBudget, "the preview fits the budget")
	assert.True(t, strings.HasPrefix(want, preview), "the preview is the text's beginning")
	assert.Regexp(t, `^caddymcp://results/[A-Za-z0-9_-]{43}$`, link.URI)
	assert.Equal(t, int64(len(want)), *link.Size)
	assert.Equal(t, "text/plain", link.MIMEType)
	assert.Equal(t, link.URI+"?from="+strconv.Itoa(len(preview)), next, "reading on begins where the preview ends")

	require.True(t, out.Results[1].OK, "%v", out.Results[1].Error)
	rest := pagesOf(t, out.Results[1])
	assert.Equal(t, next, rest.URI, "read on from the warning's next")
	assert.Nil(t, rest.Next, "read to the last page")
	assert.Greater(t, rest.Pages, n/pageBudget, "read in pages")
	require.Len(t, rest.List, rest.Pages)
	checkPages(t, rest, want, len(preview))
	require.Equal(t, len(want), len(preview)+rest.Bytes, "reassembled: as long as the text")
	t.Logf("%d bytes: a preview of %d bytes and %d pages, in %v", len(want), len(preview), rest.Pages, took.Round(time.Millisecond))

	require.True(t, out.Results[2].OK, "%v", out.Results[2].Error)
	first := pagesOf(t, out.Results[2])
	assert.Equal(t, link.URI, first.URI, "read from the link")
	assert.Equal(t, 2, first.Pages, "as many pages as asked")
	require.NotNil(t, first.Next)
	checkPages(t, first, want, 0)

	tsNotFound(t, endpoint, link.URI, next)
	owner := withHeader("Mcp-Session-Id", out.Session.SessionID, "MCP-Protocol-Version", out.Session.ProtocolVersion)
	_, body := post(t, endpoint, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"`+link.URI+`"}}`, owner)
	assert.Contains(t, string(body), `"caddymcp.dev/from":0}`, "the link still reads for its own session")
}

// tsNotFound has a second TypeScript client session read another's link
// and page, and a made-up link: all are refused alike, NOT_FOUND.
func tsNotFound(t *testing.T, endpoint, link, next string) {
	t.Helper()
	madeUp := "caddymcp://results/" + strings.Repeat("A", 43)
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
		{Op: "readResource", Params: map[string]any{"uri": link}},
		{Op: "readResource", Params: map[string]any{"uri": madeUp}},
		readPagesStep(map[string]any{"uri": next}),
	}})
	require.Len(t, out.Results, 3)
	for i, r := range out.Results {
		require.False(t, r.OK, "step %d is refused", i)
		assert.Equal(t, "McpError", r.Error.Name, "step %d: a JSON-RPC error", i)
		assert.Equal(t, -32000, r.Error.IntCode(), "step %d", i)
		assert.Contains(t, string(r.Error.Data), `"code":"NOT_FOUND"`, "step %d", i)
	}
	assert.Equal(t, out.Results[1].Error.Message, out.Results[0].Error.Message, "another's link reads as a made-up one")
	assert.JSONEq(t, string(out.Results[1].Error.Data), string(out.Results[0].Error.Data))
	p := pagesOf(t, out.Results[2])
	assert.Equal(t, next, p.URI)
	assert.Zero(t, p.Pages, "no page read")
}
