package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/resultstore"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// What reading a kept result leaves behind for the operator: a span per
// read, linked to the span of the call that made the result; a log line
// when it is kept and one per read; the reads counted by outcome. And an
// expired result, deleted by any node's sweep, reads as NOT_FOUND.

// traceSender is a transport that sends the traceparent it holds, if any.
type traceSender struct {
	traceparent atomic.Pointer[string]
}

func (tr *traceSender) RoundTrip(r *http.Request) (*http.Response, error) {
	if tp := tr.traceparent.Load(); tp != nil {
		r = r.Clone(r.Context())
		r.Header.Set("traceparent", *tp)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// in sends what follows in a new trace, and returns its id.
func (tr *traceSender) in(t *testing.T) string {
	id, tp := newTraceID(t)
	tr.traceparent.Store(&tp)
	return id
}

// readPage reads the page at uri, and returns its text and the next
// page's URI.
func readPage(t *testing.T, cs *mcp.ClientSession, uri string) (text, next string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	require.NoError(t, err)
	require.Len(t, res.Contents, 1)
	next, _ = res.Meta["caddymcp.dev/next"].(string)
	return res.Contents[0].Text, next
}

func TestPageReadsAreTracedLinkedToTheCallLoggedAndCounted(t *testing.T) {
	rec := mcptest.TraceReceiver(t)
	logFile := tempLog(t, "caddy.log")
	gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Admin: true, Log: "output file " + logFile + "\nformat json\nlevel INFO",
		Site: "tracing {\n\tspan http\n}\n" + pageResults + mcptest.ProxyTo(mcptest.StartTextServer(t)),
	})
	tr := &traceSender{}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "audit", Version: "0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, HTTPClient: &http.Client{Transport: tr}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	before := mcpMetrics(t, gw.AdminURL)

	callTrace := tr.in(t)
	_, link, next := pagedCall(t, cs, 300<<10)
	id := strings.TrimPrefix(link.URI, "caddymcp://results/")
	callSpan := spanNamed(t, rec.Trace(t, callTrace, "tools/call dump"), "tools/call dump")

	readTrace := tr.in(t)
	uris := []string{next}
	first, second := readPage(t, cs, next)
	uris = append(uris, second)
	text, _ := readPage(t, cs, second)
	read := rec.Until(t, readTrace, func(s []*mcptest.Span) bool { return len(withName(s, "resources/read")) == 2 })
	for i, s := range withName(read, "resources/read") {
		assert.Contains(t, s.Links, callSpan.SpanID, "read %d is linked to the call's span", i)
		assert.Contains(t, uris, s.Attributes["mcp.resource.uri"])
		assert.False(t, s.StatusError)
	}

	madeUpTrace := tr.in(t)
	mcptest.PageNotFound(t, cs, "caddymcp://results/"+strings.Repeat("A", 43))
	refused := spanNamed(t, rec.Trace(t, madeUpTrace, "resources/read"), "resources/read")
	assert.NotContains(t, refused.Links, callSpan.SpanID)
	assert.True(t, refused.StatusError, "a NOT_FOUND read fails its span")

	after := mcpMetrics(t, gw.AdminURL)
	grew := func(s string) float64 { return after[s] - before[s] }
	assert.Equal(t, 2.0, grew(`caddy_mcp_result_pages_total{outcome="read"}`))
	assert.Equal(t, 1.0, grew(`caddy_mcp_result_pages_total{outcome="not_found"}`))
	assert.Equal(t, float64(len(first)+len(text)), grew(`caddy_mcp_result_page_bytes_total{}`))
	assert.Equal(t, 1.0, grew(`caddy_mcp_results_over_budget_total{action="paged",tool="dump"}`))

	byMsg := func(msg string, n int) []map[string]any {
		return waitLines(t, logFile, n, func(l map[string]any) bool { return l["msg"] == msg })
	}
	kept := byMsg("a tool's result over its budget was kept whole, to be read in pages", 1)
	require.Len(t, kept, 1)
	assert.Equal(t, id, kept[0]["result"])
	assert.Equal(t, "dump", kept[0]["tool"])
	assert.Equal(t, float64(*link.Size), kept[0]["text_bytes"])
	reads := byMsg("a page of a kept tool result was read", 2)
	require.Len(t, reads, 2)
	assert.Equal(t, id, reads[0]["result"])
	assert.Equal(t, float64(mcptest.PageOffset(t, next)), reads[0]["from"])
	assert.Equal(t, float64(len(first)), reads[0]["bytes"])
	assert.Equal(t, float64(mcptest.PageOffset(t, second)), reads[1]["from"])
	assert.Len(t, byMsg("a read of a kept tool result was answered NOT_FOUND: expired, another caller's, or not a link the gateway gave", 1), 1)
	for _, l := range append(kept, reads...) {
		assert.Regexp(t, `^sha256:[0-9a-f]{16}$`, l["session"], "the session is named by its digest, never its id")
	}
	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), cs.ID(), "no log line holds the session's id")
}

// withName is the spans named name.
func withName(spans []*mcptest.Span, name string) []*mcptest.Span {
	var out []*mcptest.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// A result past its TTL is deleted by the sweep of any node that shares
// the storage (here a store whose clock is past the TTL and its grace),
// and its link then reads as a made-up one; nothing of it is left.
func TestPageAnExpiredResultSweptByAnyNodeIsNotFound(t *testing.T) {
	gw := mcptest.StartGateway(t, pageResults+mcptest.ProxyTo(mcptest.StartTextServer(t)))
	cs := goSession(t, gw.URL+mcptest.MCPPath)
	_, link, next := pagedCall(t, cs, 200<<10)
	text, _ := readPage(t, cs, next)
	require.NotEmpty(t, text, "read before it expires")
	results := filepath.Join(gw.Storage, filepath.FromSlash(resultstore.Prefix))
	entries, err := os.ReadDir(results)
	require.NoError(t, err)
	require.Len(t, entries, 1, "one result kept")

	later := func() time.Time { return time.Now().Add(2 * time.Hour) } // the default TTL is 1h
	other, err := resultstore.Open(&certmagic.FileStorage{Path: gw.Storage}, []byte(pageKey), resultstore.Limits{}, later)
	require.NoError(t, err)
	deleted, err := other.Sweep(t.Context(), 1000)
	require.NoError(t, err)
	assert.Positive(t, deleted)

	msg, data := mcptest.PageNotFound(t, cs, link.URI)
	msg2, data2 := mcptest.PageNotFound(t, cs, next)
	madeMsg, madeData := mcptest.PageNotFound(t, cs, "caddymcp://results/"+strings.Repeat("A", 43))
	assert.Equal(t, []string{madeMsg, madeData, madeMsg, madeData}, []string{msg, data, msg2, data2}, "an expired link reads as a made-up one")
	entries, err = os.ReadDir(results)
	if !os.IsNotExist(err) {
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing of the result is left in the storage")
	}
}
