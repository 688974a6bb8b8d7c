package test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Hostile upstreams and clients against a real Caddy: streams the gateway
// must not touch or split, and values a client chooses that must not reach
// the admin API or the log as they are.

// streamGap is how long the upstreams below leave a stream idle: several
// sse_keepalive periods (50ms), so that a keep-alive is due during it.
const streamGap = 300 * time.Millisecond

// gzipStream compresses events as an upstream writes them in parts: every
// part but the last is followed by a sync flush, so that it can be sent and
// decoded on its own. It returns the compressed bytes of each part.
func gzipStream(t *testing.T, parts ...string) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	out := make([][]byte, 0, len(parts))
	for i, p := range parts {
		_, err := io.WriteString(zw, p)
		require.NoError(t, err)
		if i < len(parts)-1 {
			require.NoError(t, zw.Flush())
		} else {
			require.NoError(t, zw.Close())
		}
		out = append(out, bytes.Clone(buf.Bytes()))
		buf.Reset()
	}
	return out
}

// startTimedStream is an upstream that answers every POST with an event
// stream of the given headers, then writes each chunk (flushing after
// each), leaving the stream idle for streamGap before every chunk,
// the first included. wait, when not nil, is waited for before the first
// gap. It returns the upstream's host:port.
func startTimedStream(t *testing.T, header http.Header, wait <-chan struct{}, chunks ...[]byte) string {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range header {
			w.Header()[k] = vs
		}
		w.WriteHeader(http.StatusOK)
		flush := http.NewResponseController(w).Flush
		_ = flush()
		if wait != nil {
			select {
			case <-wait:
			case <-stop:
				return
			case <-r.Context().Done():
				return
			}
		}
		for _, c := range chunks {
			// The idle time is the behaviour under test: a keep-alive is due.
			gap := time.NewTimer(streamGap)
			select {
			case <-gap.C:
			case <-stop:
				gap.Stop()
				return
			case <-r.Context().Done():
				gap.Stop()
				return
			}
			if _, err := w.Write(c); err != nil {
				return
			}
			if flush() != nil {
				return
			}
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.CloseClientConnections()
		srv.Close()
	})
	return strings.TrimPrefix(srv.URL, "http://")
}

// envelopeCount is the sum of every caddy_mcp_envelopes_total series in m.
func envelopeCount(m map[string]float64) float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "caddy_mcp_envelopes_total{") {
			n += v
		}
	}
	return n
}

// TestCompressedEventStreamPassesUntouched: an upstream answers a tools/call
// with a gzip-compressed event stream (Content-Encoding: gzip, asked for by
// the client's Accept-Encoding) holding the call's whole response, ended
// cleanly, and idle before its first byte and again mid-way, for several
// keep-alive periods. The gateway cannot read compressed events, so it must
// neither follow the stream (no repair event appended after the gzip data:
// the response is there, it just cannot see it) nor keep it alive (no ":"
// line inside the gzip data): the client must receive exactly the bytes the
// upstream sent, gzip must decode them without error to exactly the events
// the upstream compressed, and no envelope may be counted.
func TestCompressedEventStreamPassesUntouched(t *testing.T) {
	event := replaceIDs(responseEvent)
	half := len(event) / 2
	parts := gzipStream(t, event[:half], event[half:])
	upstream := startTimedStream(t, http.Header{
		"Content-Type":     {"text/event-stream"},
		"Content-Encoding": {"gzip"},
		"Cache-Control":    {"no-cache"},
	}, nil, parts...)
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Admin: true,
		Site:  "mcp {\n\tsse_keepalive 50ms\n}\nreverse_proxy " + upstream,
	})
	before := mcpMetrics(t, g.AdminURL)

	// A client that decompresses itself, so that it sees the bytes as sent.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, raw, err := send(g.URL+mcptest.MCPPath, wire.ProgressCall("compressed"),
		withContext(ctx), withClient(&http.Client{Transport: tr}), withHeader("Accept-Encoding", "gzip"))
	require.NoError(t, err, "the stream ends cleanly")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))

	assert.Equal(t, bytes.Join(parts, nil), raw, "the compressed bytes, exactly as the upstream sent them")
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if assert.NoError(t, err, "the stream is gzip from its first byte: %q", clip(raw)) {
		plain, err := io.ReadAll(zr)
		assert.NoError(t, err, "gzip decodes to its end, with nothing after the upstream's data")
		assert.Equal(t, event, string(plain), "the events, exactly as the upstream compressed them")
	}

	after := mcpMetrics(t, g.AdminURL)
	d := delta(before, after)
	assert.Equal(t, 1.0, d[`caddy_mcp_requests_total{method="tools/call",outcome="forwarded"}`], "the call was seen and forwarded: %v", d)
	assert.Zero(t, envelopeCount(after)-envelopeCount(before), "no envelope was answered: %v", d)
}

// TestKeepaliveDoesNotSplitAnEventAtACarriageReturn: with sse_keepalive
// 50ms, an upstream answers a tools/call with an event stream whose lines
// end in CR LF, and leaves it idle for several keep-alive periods just after
// a CR, before the LF that completes the line end. A keep-alive written
// there (":\n" after the CR) is a comment line, and the upstream's LF that
// follows becomes a blank line: the event is dispatched early. The client
// must receive exactly one event, whose data is the whole response, and the
// event's bytes must arrive contiguous, exactly as the upstream wrote them;
// keep-alives may only come before it. (That the stream is kept alive at all
// is checked first: the upstream starts the event only once the client has
// received a ":" line.)
func TestKeepaliveDoesNotSplitAnEventAtACarriageReturn(t *testing.T) {
	const (
		head = `{"jsonrpc":"2.0","id":7,`
		tail = `"result":{"content":[{"type":"text","text":"done"}]}}`
	)
	for _, tc := range []struct {
		name string
		// chunks are written after the idle gap each; the event is their
		// concatenation.
		chunks []string
		// data is the event's data, as the SSE standard gives it.
		data string
	}{
		{
			// A standard client dispatches the event at the LF either way; a
			// reader that splits lines on LF alone and drops a CR before it
			// (as bufio.ScanLines does) reads the data line as `{...}\r:`
			// when a ":" follows the CR: not JSON.
			name:   "the data line's CR, then its LF and the blank line",
			chunks: []string{"event: message\r\ndata: " + head + tail + "\r", "\n\r\n"},
			data:   head + tail,
		},
		{
			// A standard client sees the blank line in the middle: two events,
			// neither of them JSON.
			name:   "the first data line's CR, then its LF and the second data line",
			chunks: []string{"event: message\r\ndata: " + head + "\r", "\ndata: " + tail + "\r\n\r\n"},
			data:   head + "\n" + tail,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tc.data)))
			kept := make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(kept) })
			chunks := make([][]byte, len(tc.chunks))
			for i, c := range tc.chunks {
				chunks[i] = []byte(c)
			}
			upstream := startTimedStream(t, http.Header{"Content-Type": {"text/event-stream"}}, kept, chunks...)
			g := mcptest.StartGateway(t, "mcp {\n\tsse_keepalive 50ms\n}\nreverse_proxy "+upstream)

			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			resp, err := open(g.URL+mcptest.MCPPath, wire.ProgressCall("slow"), withContext(ctx))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

			br := bufio.NewReader(resp.Body)
			first := make(chan string, 1)
			go func() {
				line, _ := br.ReadString('\n')
				first <- line
			}()
			select {
			case line := <-first:
				require.Equal(t, ":\n", line, "the idle stream is kept alive before the event")
			case <-ctx.Done():
				t.Fatal("no keep-alive arrived on the idle stream")
			}
			once.Do(func() { close(kept) })
			rest, err := io.ReadAll(br)
			require.NoError(t, err, "the stream ends cleanly")

			events := parseSSE(rest)
			if assert.Len(t, events, 1, "one event: %q", rest) {
				assert.Equal(t, "message", events[0].event)
				assert.Equal(t, tc.data, events[0].data, "the whole response, in one event")
			}
			sent := strings.Join(tc.chunks, "")
			got := strings.TrimLeft(string(rest), ":\n")
			assert.True(t, strings.HasPrefix(got, sent), "the event's bytes arrive contiguous, nothing inside them:\nsent %q\ngot  %q", sent, rest)
			assert.Empty(t, strings.ReplaceAll(strings.TrimPrefix(got, sent), ":\n", ""), "only keep-alives follow the event: %q", rest)
		})
	}
}

// TestAdminStatusShowsGuardKeysAsDigestsUnlessLogKey: a concurrency guard
// keyed on a secret (an API key header) shows its live keys on GET
// /mcp/status, which anyone who reaches the admin API can read. While a call
// holds a place, the raw key must appear nowhere in the status: the key is
// shown as "sha256:" and the first 16 hex digits of its SHA-256, which an
// operator can compute for a key they know. Reloaded with log_key, the
// operator has chosen to see keys: the status shows the raw key.
func TestAdminStatusShowsGuardKeysAsDigestsUnlessLogKey(t *testing.T) {
	const secret = "sk-live-secret-123"
	sum := sha256.Sum256([]byte(secret))
	digest := "sha256:" + hex.EncodeToString(sum[:])[:16]

	h := startUpstream(t, holdCallsOf("hold"))
	site := func(logKey string) string {
		return `mcp {
	concurrency {
		max 1
		queue 1
		key {header.X-Api-Key}
	}
	` + logKey + `
}
reverse_proxy ` + h.addr
	}
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: site("")})
	endpoint := g.URL + mcptest.MCPPath
	heldKey := func(s gatewayStatus) bool {
		c := s.Handlers[0].Features.Concurrency
		return c.Active == 1 && len(c.Keys) == 1 && c.Keys[0].Active == 1
	}
	idle := func(s gatewayStatus) bool {
		c := s.Handlers[0].Features.Concurrency
		return c.Active == 0 && len(c.Keys) == 0
	}

	key := withHeader("X-Api-Key", secret)
	for i, phase := range []struct{ logKey, shown, why string }{
		{"", digest, "the key is shown as the start of its SHA-256"},
		{"log_key", secret, "with log_key, the key as it is"},
	} {
		if i > 0 {
			g.Reload(t, site(phase.logKey))
		}
		held := postAsync(t, endpoint, wire.ToolCall("secret-"+strconv.Itoa(i), "hold"), key, afterReload(t))
		h.waitHeld(t, 1)
		raw := waitStatus(t, g.AdminURL, heldKey)
		t.Logf("GET /mcp/status with %q:\n%s", phase.logKey, raw)
		if phase.logKey == "" {
			assert.NotContains(t, string(raw), secret, "the raw key appears nowhere")
		}
		_, s, err := getStatus(g.AdminURL)
		require.NoError(t, err)
		require.Len(t, s.Handlers, 1)
		require.Len(t, s.Handlers[0].Features.Concurrency.Keys, 1)
		assert.Equal(t, phase.shown, s.Handlers[0].Features.Concurrency.Keys[0].Key, phase.why)
		h.release(1)
		assert.Equal(t, "done", receive(t, held))
		waitStatus(t, g.AdminURL, idle)
	}
}

// handlerLogLines reads a JSON log file's lines as they are, and returns
// those of the mcp handler's logger, each with its length in bytes. Unlike
// jsonLines, it has no bound on a line's length: an unbounded line is what
// it must find.
func handlerLogLines(t *testing.T, path string) (lines []map[string]any, sizes []int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%s", clip(line))
		if m["logger"] == handlerLogger {
			lines = append(lines, m)
			sizes = append(sizes, len(line))
		}
	}
	return lines, sizes
}

// assertCut checks a logged value against the cut one it must be, printing
// at most the start of an uncut one.
func assertCut(t *testing.T, want string, got any, msg string) {
	t.Helper()
	s, _ := got.(string)
	assert.True(t, s == want, "%s: want %s, got %s", msg, clip([]byte(want)), clip([]byte(s)))
}

// assertSmallEnvelope checks that an answer carries an envelope, of fewer
// than limit bytes, and returns it.
func assertSmallEnvelope(t *testing.T, body []byte, limit int) string {
	t.Helper()
	text, err := wire.EnvelopeText(body)
	require.NoError(t, err, "%s", clip(body))
	assert.NotEmpty(t, text, "the answer carries an envelope: %s", clip(body))
	assert.Less(t, len(text), limit, "the envelope stays small: %s", clip(body))
	return text
}

// TestClientChosenValuesAreCutInLogsAndEnvelopes: a client sends values of
// its own choosing a megabyte long, in requests the gateway refuses and so
// logs: a tools/call whose tool name is 1 MiB (twice, under a rate limit
// keyed on the tool name, so that the second would be refused by the limit
// if the first got through), a request whose method is 1 MiB, one whose
// Mcp-Name header (8 KiB) disagrees with its body, and one whose method is
// 1 MiB and which also gives "Method" (ambiguous). Every log line of the mcp
// handler must stay under 4 KiB and hold at most 256 bytes of any of the
// client's values: the tool name and the method are logged cut, ending with
// "... (N bytes)" where N is their length. The second refusal of the long
// tool name repeats the first: it is counted, on the line the reload that
// ends the config writes. The envelope each client gets back must stay
// under 4 KiB too, and the mismatch's envelope, which quotes the header,
// quotes it cut.
func TestClientChosenValuesAreCutInLogsAndEnvelopes(t *testing.T) {
	const mib = 1 << 20
	const limit = 4 << 10
	tool := strings.Repeat("t", mib)
	method := strings.Repeat("m", mib)
	cut := func(s string) string { return s[:256] + "... (" + strconv.Itoa(len(s)) + " bytes)" }

	upstream := startUpstream(t).addr
	logFile := tempLog(t, "caddy.log")
	site := `mcp {
	rate_limit hostile_long_values {
		rate 1/1h
		key {http.mcp.tool}
	}
}
reverse_proxy ` + upstream
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Log:  "output file " + logFile + "\nformat json\nlevel INFO",
		Site: site,
	})
	endpoint := g.URL + mcptest.MCPPath

	for _, id := range []string{"long-tool-1", "long-tool-2"} {
		resp, body := post(t, endpoint, wire.ToolCall(id, tool))
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "VALIDATION_ERROR", wire.Outcome(body), "a tool name over 128 characters is refused: %s", clip(body))
		assertSmallEnvelope(t, body, limit)
	}

	resp, body := post(t, endpoint, `{"jsonrpc":"2.0","id":"long-method","method":"`+method+`"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a method over 128 bytes is refused, with the request's id: %s", clip(body))
	assert.Equal(t, "VALIDATION_ERROR", wire.Outcome(body))
	assertSmallEnvelope(t, body, limit)

	name := strings.Repeat("n", 8<<10)
	resp, body = post(t, endpoint, `{"jsonrpc":"2.0","id":"long-name-header","method":"tools/call","params":{"name":"echo"}}`, withHeader("Mcp-Name", name))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "Mcp-Name disagrees with the body: %s", clip(body))
	text := assertSmallEnvelope(t, body, limit)
	assert.True(t, strings.Contains(text, `the Mcp-Name header says "`+cut(name)+`"`), "the envelope quotes the header cut, saying how long it was: %s", clip([]byte(text)))

	resp, body = post(t, endpoint, `{"jsonrpc":"2.0","id":"long-method-twice","method":"`+method+`","Method":"x"}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a method given twice is ambiguous: %s", clip(body))
	assertSmallEnvelope(t, body, limit)

	// The reload ends the handler, which logs what it counted.
	g.Reload(t, site)
	lines, sizes := handlerLogLines(t, logFile)
	for i, l := range lines {
		assert.Less(t, sizes[i], limit, "log line %d is %d bytes", i, sizes[i])
		b, _ := json.Marshal(l)
		t.Logf("%s", clip(b))
		for k, v := range l {
			s, _ := v.(string)
			if strings.Contains(s, strings.Repeat("t", 300)) || strings.Contains(s, strings.Repeat("m", 300)) {
				t.Errorf("log line %d: %s holds more than 256 bytes of the client's value", i, k)
			}
		}
	}
	require.Equal(t, 5, len(lines), "one line per kind of refusal, and one counting the second long tool name")
	// The requests were sent one after the other, and each refusal is
	// logged before it is answered: the lines are in the order sent. The
	// second long tool name repeats the first refusal, and is counted.
	assert.Equal(t, "long-tool-1", lines[0]["id"])
	assertCut(t, cut(tool), lines[0]["tool"], "the tool name is cut, saying how long it was")
	assert.Equal(t, "long-method", lines[1]["id"])
	assertCut(t, cut(method), lines[1]["method"], "the method is cut, saying how long it was")
	assert.Equal(t, "long-name-header", lines[2]["id"])
	assert.Nil(t, lines[3]["id"], "an ambiguous body's id is not read")
	for _, l := range lines {
		assert.Equal(t, "VALIDATION_ERROR", l["code"])
	}
	counted := lines[4]
	assert.Equal(t, "answered with more envelopes of this kind", counted["msg"])
	assert.Equal(t, 1.0, counted["repeated"])
	assert.Equal(t, "Request refused: a tool name is 1048576 characters long; MCP tool names have at most 128", counted["message"])
}
