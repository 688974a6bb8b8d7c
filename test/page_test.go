package test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Results kept whole (results { page }): past the budget, the call is
// answered with a warning, a preview and a resource_link, and the official
// Go SDK client reads the rest with resources/read, page by page, through
// a real Caddy whose file storage keeps the result encrypted.

// pageKey is the key the results are kept under: 40 bytes.
const pageKey = "page-test-key-0123456789abcdef-0123456789"

// pageBudget is the budget of the tests' gateways.
const pageBudget = 64 << 10

// pageResults is the mcp block of a gateway that pages every tool's
// result past 64 KiB.
const pageResults = "mcp {\n\tresults {\n\t\tmax 64KiB\n\t\tpage\n\t\tstore {\n\t\t\tkey " + pageKey + "\n\t\t}\n\t}\n}\n"

// pagedCall calls dump {n} and returns its preview, its link, and the URI
// the warning says to read on from.
func pagedCall(t *testing.T, cs *mcp.ClientSession, n int) (preview string, link *mcp.ResourceLink, next string) {
	t.Helper()
	return mcptest.Paged(t, mcptest.CallDump(t, cs, n))
}

// readPages reads from uri to the last page, each checked
// (mcptest.ReadPages), and returns the text read and how many pages it
// took.
func readPages(t *testing.T, cs *mcp.ClientSession, uri string) (string, int) {
	t.Helper()
	text, uris := mcptest.ReadPages(t, cs, uri, pageBudget, nil)
	return text, len(uris)
}

// A 20 MB text result is previewed within the budget, linked, and read
// back page by page by the official Go SDK client, byte for byte; another
// session, a made-up link and a malformed one all get the same NOT_FOUND.
func TestPageGoSDKReassembles(t *testing.T) {
	const n = 20 << 20
	want := mcptest.LongText(n)
	gw := mcptest.StartGateway(t, pageResults+mcptest.ProxyTo(mcptest.StartTextServer(t)))
	endpoint := gw.URL + mcptest.MCPPath
	cs := goSession(t, endpoint)

	preview, link, next := pagedCall(t, cs, n)
	require.NotEmpty(t, preview)
	assert.Less(t, len(preview), pageBudget, "the preview fits the budget")
	assert.True(t, strings.HasPrefix(want, preview), "the preview is the text's beginning")
	assert.Regexp(t, `^caddymcp://results/[A-Za-z0-9_-]{43}$`, link.URI)
	assert.Equal(t, int64(len(want)), *link.Size)
	assert.Equal(t, "text/plain", link.MIMEType)
	assert.Equal(t, link.URI+"?from="+strconv.Itoa(len(preview)), next, "reading on begins where the preview ends")

	rest, pages := readPages(t, cs, next)
	assert.Greater(t, pages, n/pageBudget, "read in pages")
	require.Equal(t, len(want), len(preview)+len(rest))
	require.True(t, preview+rest == want, "reassembled byte for byte")
	t.Logf("%d bytes: a preview of %d bytes and %d pages", len(want), len(preview), pages)

	at := strings.LastIndexByte(want[:len(want)-100], '\n') + 1
	tail, _ := readPages(t, cs, link.URI+"?from="+strconv.Itoa(at))
	assert.Equal(t, want[at:], tail, "a page read from any offset")

	other := goSession(t, endpoint)
	msg, data := mcptest.PageNotFound(t, other, link.URI)
	madeUp := "caddymcp://results/" + strings.Repeat("A", 43)
	msg2, data2 := mcptest.PageNotFound(t, cs, madeUp)
	assert.Equal(t, msg, msg2, "another's link reads as a made-up one")
	assert.Equal(t, data, data2)
	mcptest.PageNotFound(t, cs, "caddymcp://results/")
	mcptest.PageNotFound(t, cs, link.URI+"?from=x")
	mcptest.PageNotFound(t, other, next)
}

// Behind federation, the link a call to one server gave is read from the
// gateway, which no server is asked: not refused as a resource no server
// has, not sent to one, and kept for the client's own session.
func TestPageFederated(t *testing.T) {
	const n = 1 << 20
	want := mcptest.LongText(n)
	results := strings.TrimSuffix(strings.TrimPrefix(pageResults, "mcp {\n"), "}\n")
	site := federatedSite([]string{"demo", "text"}, []string{startStatefulDemo(t), mcptest.StartTextServer(t)}, results)
	gw := mcptest.StartGateway(t, site)
	endpoint := gw.URL + mcptest.MCPPath
	cs := goSession(t, endpoint)

	preview, link, next := pagedCall(t, cs, n)
	rest, _ := readPages(t, cs, next)
	require.True(t, preview+rest == want, "reassembled byte for byte")
	first, _ := readPages(t, cs, link.URI)
	require.True(t, first == want, "read from the start")

	msg, data := mcptest.PageNotFound(t, goSession(t, endpoint), link.URI)
	msg2, data2 := mcptest.PageNotFound(t, cs, "caddymcp://results/"+strings.Repeat("A", 43))
	assert.Equal(t, msg, msg2, "another's link reads as a made-up one")
	assert.Equal(t, data, data2)
}

// With authorization, a result is kept for the principal that made the
// call, whichever of its sessions reads it: another session of the same
// client reads it; another principal, signed in at the same issuer, gets
// the NOT_FOUND of a made-up link (here through the official Go SDK's
// OAuth client, against the real authorization server).
func TestPageKeptForThePrincipal(t *testing.T) {
	const n = 256 << 10
	as := mcptest.NewAuthServer(t)
	results := strings.TrimSuffix(strings.TrimPrefix(pageResults, "mcp {\n"), "}\n")
	gw := mcptest.StartGateway(t, "mcp {\n\tauthorization {\n\t\tissuer "+as.Issuer+"\n\t}\n"+results+"}\n"+mcptest.ProxyTo(mcptest.StartTextServer(t)))
	scope := mcptest.AuthResource{Scope: "tools:read tools:call"}
	as.Start(t, mcptest.AuthServerConfig{
		Clients: []mcptest.AuthClient{agent, other}, Resources: map[string]mcptest.AuthResource{gw.URL: scope}, DefaultResource: gw.URL,
	}, "k1")
	endpoint := gw.URL + mcptest.MCPPath

	cs := signIn(t, endpoint, agent)
	preview, link, next := pagedCall(t, cs, n)
	again := signIn(t, endpoint, agent)
	require.NotEqual(t, cs.ID(), again.ID(), "another session")
	rest, _ := readPages(t, again, next)
	require.True(t, preview+rest == mcptest.LongText(n), "read back byte for byte by the same principal's other session")

	stranger := signIn(t, endpoint, other)
	msg, data := mcptest.PageNotFound(t, stranger, link.URI)
	msg2, data2 := mcptest.PageNotFound(t, stranger, next)
	madeMsg, madeData := mcptest.PageNotFound(t, cs, "caddymcp://results/"+strings.Repeat("A", 43))
	assert.Equal(t, []string{madeMsg, madeData, madeMsg, madeData}, []string{msg, data, msg2, data2}, "another principal's read is a made-up link's")
}
