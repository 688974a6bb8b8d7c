package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/heapprobe"
	"github.com/caddymcp/caddy-mcp/results"
	"github.com/caddymcp/caddy-mcp/resultstore"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A result of 200 MB costs the gateway its budget, not its size. The
// official Go SDK server that writes it runs as a process of its own
// (test/bigserver), so that the heap of the test process, where Caddy
// runs, holds only what the gateway and the test's client allocate. No
// test of this package runs in parallel: while a call is measured, the
// rest of the process is Caddy's background work.

// hugeResult is the bytes of text the tool big is asked for.
const hugeResult = 200_000_000

// hugeBudget is "tokens 25000" in bytes: Claude Code's limit.
const hugeBudget = 25_000 * results.BytesPerToken

// hugeCost is what one call of big for hugeResult bytes cost.
type hugeCost struct {
	// received is the bytes of the answer the client read, head their
	// first twice the budget.
	received int64
	head     []byte
	// allocated is the heap the test process allocated during the call:
	// a bound on what the gateway held at its peak, whatever the collector
	// did meanwhile.
	allocated uint64
	// peak is the most heap objects (live or not yet swept) seen during
	// the call over those before it, sampled every millisecond: what the
	// heap grew by, at least.
	peak int64
}

func (c hugeCost) String() string {
	return fmt.Sprintf("the client read %d bytes; the test process allocated %d bytes (%.2f MiB); its heap was seen to grow by %.2f MiB at most",
		c.received, c.allocated, float64(c.allocated)/(1<<20), float64(c.peak)/(1<<20))
}

// callHuge calls big for hugeResult bytes through endpoint, with a
// progress token when sse, once warmed up by a small call.
func callHuge(t *testing.T, endpoint string, sse bool) hugeCost {
	t.Helper()
	resp, _ := post(t, endpoint, bigCall(10, sse))
	require.Equal(t, http.StatusOK, resp.StatusCode)

	before := int64(heapObjects())
	stop := heapprobe.Peak()
	start := allocated()
	read, head, err := readAnswer(t.Context(), endpoint, bigCall(hugeResult, sse))
	end, peak := allocated(), stop()
	require.NoError(t, err)
	return hugeCost{received: read, head: head, allocated: end - start, peak: int64(peak) - before}
}

// readAnswer posts call to endpoint and reads the answer, keeping its
// first twice the budget only: the client holds no more of it than that.
func readAnswer(ctx context.Context, endpoint, call string, opts ...sendOption) (read int64, head []byte, err error) {
	resp, err := openWith(newSendConfig(ctx, opts), endpoint, call)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	w := &headWriter{b: make([]byte, 0, 2*hugeBudget)}
	read, err = io.Copy(w, resp.Body)
	return read, w.b, err
}

// headWriter keeps the first bytes written to it, as many as b has room
// for.
type headWriter struct{ b []byte }

func (h *headWriter) Write(p []byte) (int, error) {
	if room := cap(h.b) - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// What the gateway holds of an answer, whatever the budget: a JSON answer
// is read up to the budget, then let go of; an event of an event stream
// is held up to the core's bound of an event (maxEventData, 1 MiB: a
// partial line up to it and twice it of raw bytes, grown by append: about
// 11 MiB allocated in all), then skimmed to its end.
const (
	jsonHold = 2 << 20
	sseHold  = 16 << 20
)

// copyCost bounds what Caddy's reverse_proxy allocates as it copies n
// bytes: a logger for each read, about 0.6% of the bytes, none of it held.
func copyCost(n int) uint64 { return uint64(n) / 100 }

func TestAHugeResultCostsTheGatewayItsBudgetNotItsSize(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for _, c := range []struct {
		sse, truncate bool
		hold          uint64
		// copied is what the gateway reads of the answer: a cut reads it
		// all, to its isError.
		copied int
	}{
		{false, false, jsonHold, hugeBudget},
		{true, false, sseHold, hugeResult},
		{false, true, jsonHold, hugeResult},
		{true, true, sseHold, hugeResult},
	} {
		t.Run(fmt.Sprintf("sse=%t,truncate=%t", c.sse, c.truncate), func(t *testing.T) {
			upstream := mcptest.StartBigServer(t, bin, c.sse)
			budget := "tokens 25000"
			if c.truncate {
				budget += "\n\t\ttruncate"
			}
			g := mcptest.StartGateway(t, "mcp {\n\tresults {\n\t\t"+budget+"\n\t}\n}\n"+mcptest.ProxyTo(upstream))
			cost := callHuge(t, g.URL+mcptest.MCPPath, c.sse)
			t.Logf("a %d-byte result over a %d-byte budget: %s", hugeResult, hugeBudget, cost)
			assert.Less(t, cost.allocated, 4*hugeBudget+c.hold+copyCost(c.copied), "the budget and a constant, not the 200 MB")
			if c.sse {
				assert.Contains(t, string(cost.head), "notifications/progress", "progress passes")
			}
			if c.truncate {
				assert.LessOrEqual(t, len(lastMessage(cost.head)), hugeBudget, "the cut result fits the budget")
				warning, texts, isError := cutOf(t, cost.head)
				assert.Equal(t, envelope.Code("RESULT_TRUNCATED"), warning.Code)
				assert.False(t, isError)
				require.Equal(t, 1, len(texts))
				assert.Greater(t, len(texts[0]), hugeBudget-2048, "what fits is kept")
				return
			}
			assert.Less(t, cost.received, int64(4<<10), "the 200 MB never reached the client")
			text, isError := resultOf(t, cost.head)
			assert.True(t, isError)
			env, err := envelope.Parse(text)
			require.NoError(t, err, text)
			assert.Equal(t, envelope.Code("RESULT_TOO_LARGE"), env.Code)
			assert.Contains(t, env.Message, "larger than its budget of 100000 bytes (about 25000 tokens)")
		})
	}
}

// pageHold is what keeping a result whole costs the gateway beside its
// budget, whatever the result's size: the store's chunk, filled and
// sealed in place before it is stored (resultstore.Writer: one
// DefaultChunk and its seal's 28 bytes), and the reader's buffer, the text
// decoded from the response before it is written to the store
// (results.TextBuffer). Beside them the gateway holds the budget's bytes:
// the response's first ones (the core's, until the cut reads them), the
// preview, and the answer once the chunk is let go of.
const pageHold = resultstore.DefaultChunk + results.TextBuffer

// storeCost bounds what the file storage allocates as n bytes are kept:
// for each chunk, its key, its temporary file, their names and its
// directory's check, about 1.5 KiB, none of it held.
func storeCost(n int) uint64 { return uint64(n/resultstore.DefaultChunk+1) * (2 << 10) }

// garbageStep is the heap's growth past which the peak's probe runs the
// collector (heapprobe.CollectedPeak): the collector lets 1 MiB or more
// of garbage pile up between its runs (Caddy's proxy leaves about 0.6%
// of the bytes it copies), which the gateway does not hold.
const garbageStep = 256 << 10

// A result of 200 MB kept whole costs the gateway its buffer, not its
// size: the heap's peak over the call, its garbage collected every
// garbageStep, grows by less than twice pageHold (a second chunk held, or
// the text held up to a chunk, would pass it), and the whole 200 MB is
// stored, read back from its middle and its end.
func TestAHugeResultKeptWholeCostsTheGatewayItsBuffer(t *testing.T) {
	upstream := mcptest.StartBigServer(t, mcptest.BuildBigServer(t), false)
	g := mcptest.StartGateway(t, "mcp {\n\tresults {\n\t\ttokens 25000\n\t\tpage\n\t\tstore {\n\t\t\tkey "+pageKey+"\n\t\t}\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	endpoint := g.URL + mcptest.MCPPath
	session := withHeader("Mcp-Session-Id", "huge", "MCP-Protocol-Version", "2025-06-18")
	_, warm := post(t, endpoint, bigCall(2*hugeBudget, false), session) // a first result kept
	require.Contains(t, string(warm), "RESULT_TRUNCATED")

	before := int64(heapObjects())
	stop := heapprobe.CollectedPeak(garbageStep)
	start := allocated()
	read, head, err := readAnswer(t.Context(), endpoint, bigCall(hugeResult, false), session)
	end, peak := allocated(), stop()
	require.NoError(t, err)
	cost := hugeCost{received: read, head: head, allocated: end - start, peak: int64(peak) - before}
	t.Logf("a %d-byte result kept whole, over a %d-byte budget: %s; the buffer is %d bytes", hugeResult, hugeBudget, cost, pageHold)
	assert.LessOrEqual(t, cost.peak, int64(2*pageHold), "the heap held its buffer, not the 200 MB")
	// Allocated: the buffer; the budget six times (the response's first
	// bytes, the preview, the answer and its text, the client's twice);
	// what the proxy and the file storage throw away.
	assert.Less(t, cost.allocated, pageHold+6*hugeBudget+copyCost(hugeResult)+storeCost(hugeResult), "the buffer, the budget and what the proxy throws away")

	link := keptLink(t, head)
	assert.Equal(t, int64(hugeResult), link.Size, "the link names the whole text")
	for _, from := range []int64{hugeResult / 2, hugeResult - 1000} {
		text, meta := readKept(t, endpoint, link.URI+"?from="+strconv.FormatInt(from, 10), session)
		assert.Equal(t, float64(hugeResult), meta[results.MetaSize])
		assert.Equal(t, float64(from), meta[results.MetaFrom])
		require.NotEmpty(t, text)
		assert.Equal(t, strings.Repeat("x", len(text)), text, "the tool's text, from %d", from)
		var next any = link.URI + "?from=" + strconv.FormatInt(from+int64(len(text)), 10)
		if from == hugeResult-1000 {
			assert.Len(t, text, 1000, "the last page ends the text")
			next = nil // the last page names none after it
		}
		assert.Equal(t, next, meta[results.MetaNext], "the page from %d", from)
	}
}

// keptResult is the resource_link of a result kept whole.
type keptResult struct {
	URI  string `json:"uri"`
	Size int64  `json:"size"`
}

// keptLink is the resource_link of the paged answer in body, after its
// warning (whose text_bytes is the link's size) and its preview.
func keptLink(t *testing.T, body []byte) keptResult {
	t.Helper()
	var rpc struct {
		Result struct {
			Content []json.RawMessage `json:"content"`
			IsError bool              `json:"isError"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &rpc), "%.300s", body)
	require.Len(t, rpc.Result.Content, 3, "the warning, the preview and the link")
	assert.False(t, rpc.Result.IsError)
	var warning contentBlock
	require.NoError(t, json.Unmarshal(rpc.Result.Content[0], &warning))
	env, err := envelope.Parse(warning.Text)
	require.NoError(t, err)
	assert.Equal(t, envelope.Code("RESULT_TRUNCATED"), env.Code)
	var link keptResult
	require.NoError(t, json.Unmarshal(rpc.Result.Content[2], &link))
	assert.Contains(t, warning.Text, `<detail key="text_bytes">`+strconv.FormatInt(link.Size, 10)+`</detail>`)
	return link
}

// readKept reads the page at uri with resources/read, and returns its
// text and its _meta.
func readKept(t *testing.T, endpoint, uri string, opts ...sendOption) (string, map[string]any) {
	t.Helper()
	read := fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":%q}}`, uri)
	_, body := post(t, endpoint, read, opts...)
	var rpc struct {
		Result struct {
			Contents []struct{ URI, Text string } `json:"contents"`
			Meta     map[string]any               `json:"_meta"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &rpc), "%.300s", body)
	require.Len(t, rpc.Result.Contents, 1, "%.300s", body)
	assert.Equal(t, uri, rpc.Result.Contents[0].URI)
	return rpc.Result.Contents[0].Text, rpc.Result.Meta
}
