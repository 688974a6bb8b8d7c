package test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// handlerLogger is the name of the mcp handler's logger (its module ID).
const handlerLogger = "http.handlers.mcp"

func TestOneLogLinePerEnvelopeAtItsLevel(t *testing.T) {
	h := startUpstream(t, holdCallsOf("hold"))
	down := mcptest.FreeLoopbackAddr(t)
	logFile := tempLog(t, "caddy.log")
	site := func(logKey string) string {
		return fmt.Sprintf(`route {
	mcp {
		rate_limit logs_limited {
			key {http.mcp.tool}
			rate 1/1h
			tools limited
		}
		concurrency logs_guard {
			max 1
		}
		%s
	}
	@down expression {http.mcp.tool} == "down"
	reverse_proxy @down %s
	reverse_proxy %s
}`, logKey, down, h.addr)
	}
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Log:  "output file " + logFile + "\nformat json\nlevel DEBUG",
		Site: site(""),
	})
	endpoint := g.URL + "/mcp"
	call := func(id, tool string) string {
		t.Helper()
		_, body := post(t, endpoint, wire.ToolCall(id, tool), afterReload(t))
		return wire.Outcome(body)
	}

	// Forwarded calls: nothing to say at info.
	require.Equal(t, "done", call("fwd-1", "echo"))
	require.Equal(t, "done", call("fwd-2", "limited"))
	resp, _ := post(t, endpoint, `{"jsonrpc":"2.0","id":"fwd-3","method":"tools/list"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.Equal(t, "RATE_LIMITED", call("limited", "limited"))
	held := postAsync(t, endpoint, wire.ToolCall("held", "hold"))
	h.waitHeld(t, 1)
	require.Equal(t, "SERVER_BUSY", call("busy", "echo"))
	h.release(1)
	require.Equal(t, "done", receive(t, held))
	require.Equal(t, "HANDOFF_UPSTREAM_UNAVAILABLE", call("down", "down"))
	resp, _ = post(t, endpoint, `{"jsonrpc":"2.0","id":"bad", not json`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = post(t, endpoint, wire.ToolCall("forbidden", "echo"), withHeader("Origin", "http://evil.example.com"))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// With log_key, a refusal names the key it was refused for.
	g.Reload(t, site("log_key"))
	require.Equal(t, "RATE_LIMITED", call("limited-key", "limited"))

	var lines []map[string]any
	for _, l := range jsonLines(t, logFile) {
		if l["logger"] == handlerLogger {
			lines = append(lines, l)
			b, _ := json.Marshal(l)
			t.Logf("%s", b)
		}
	}
	byCode := make(map[string][]map[string]any)
	for _, l := range lines {
		assert.Equal(t, "answered with an envelope", l["msg"])
		code, _ := l["code"].(string)
		byCode[code] = append(byCode[code], l)
		assert.IsType(t, float64(0), l["duration"], "every line has the duration: %v", l)
		assert.GreaterOrEqual(t, l["duration"], 0.0)
		if id, _ := l["id"].(string); strings.HasPrefix(id, "fwd-") {
			t.Errorf("a forwarded call was logged: %v", l)
		}
	}
	require.Len(t, lines, 6, "one line per envelope, and none for the forwarded calls")

	// without builds the expected line from a real one, minus the fields
	// whose values vary (ts, duration, error).
	without := func(l map[string]any, drop ...string) map[string]any {
		out := make(map[string]any, len(l))
		for k, v := range l {
			out[k] = v
		}
		for _, k := range append(drop, "ts", "duration") {
			delete(out, k)
		}
		return out
	}
	require.Len(t, byCode["RATE_LIMITED"], 2)
	assert.Equal(t, map[string]any{
		"level": "info", "logger": handlerLogger, "msg": "answered with an envelope",
		"code": "RATE_LIMITED", "method": "tools/call", "tool": "limited", "id": "limited",
		"limit": "logs_limited", "retry_after": 3600.0, "key": "sha256:7b508dace774f8ad",
	}, without(byCode["RATE_LIMITED"][0]), "without log_key, the key is a digest (printf %s limited | sha256sum | cut -c1-16)")
	assert.Equal(t, map[string]any{
		"level": "info", "logger": handlerLogger, "msg": "answered with an envelope",
		"code": "RATE_LIMITED", "method": "tools/call", "tool": "limited", "id": "limited-key",
		"limit": "logs_limited", "key": "limited", "retry_after": 3600.0,
	}, without(byCode["RATE_LIMITED"][1]))

	require.Len(t, byCode["SERVER_BUSY"], 1)
	busy := byCode["SERVER_BUSY"][0]
	assert.Equal(t, map[string]any{
		"level": "info", "logger": handlerLogger, "msg": "answered with an envelope",
		"code": "SERVER_BUSY", "method": "tools/call", "tool": "echo", "id": "busy",
		"guard": "logs_guard", "retry_after": busy["retry_after"],
	}, without(busy, "error"))
	assert.GreaterOrEqual(t, busy["retry_after"], 1.0)
	assert.Contains(t, busy["error"], "queue full")

	require.Len(t, byCode["HANDOFF_UPSTREAM_UNAVAILABLE"], 1)
	handoff := byCode["HANDOFF_UPSTREAM_UNAVAILABLE"][0]
	assert.Equal(t, map[string]any{
		"level": "warn", "logger": handlerLogger, "msg": "answered with an envelope",
		"code": "HANDOFF_UPSTREAM_UNAVAILABLE", "method": "tools/call", "tool": "down", "id": "down",
		"retry_after": 30.0, "upstream": down,
	}, without(handoff, "error"), "an upstream that is down is a warning, naming the upstream")
	assert.Contains(t, handoff["error"], "connection refused")

	require.Len(t, byCode["VALIDATION_ERROR"], 1)
	assert.Equal(t, map[string]any{
		"level": "info", "logger": handlerLogger, "msg": "answered with an envelope",
		"code": "VALIDATION_ERROR",
	}, without(byCode["VALIDATION_ERROR"][0]), "a body that is not JSON has no method or id to log")

	require.Len(t, byCode["FORBIDDEN"], 1)
	assert.Equal(t, map[string]any{
		"level": "info", "logger": handlerLogger, "msg": "answered with an envelope",
		"code": "FORBIDDEN",
	}, without(byCode["FORBIDDEN"][0]), "a foreign origin is refused before the body is read")
}

// A client hammering a limited key costs the log a few lines, not one per
// refusal: the first refusal of each key is logged as ever, with its key as
// a digest, another key's first refusal among them; the ones that follow
// are counted, and the lines of the counts add up, with the first lines, to
// every refusal sent. The reload that ends the config logs what its handler
// had counted and not yet logged. The metrics count every refusal.
func TestARefusalStormCostsTheLogAFewLinesThatCountEveryRefusal(t *testing.T) {
	const storm, conns = 10_000, 4
	upstream := startUpstream(t).addr
	logFile := tempLog(t, "caddy.log")
	site := `mcp {
	rate_limit storm_per_client {
		key {header.X-Client}
		rate 1/1h
	}
}
reverse_proxy ` + upstream
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Admin: true,
		Log:   "output file " + logFile + "\nformat json\nlevel INFO",
		Site:  site,
	})
	endpoint := g.URL + mcptest.MCPPath
	call := func(id, from string) string {
		_, body := post(t, endpoint, wire.ToolCall(id, "echo"), withHeader("X-Client", from))
		return wire.Outcome(body)
	}
	require.Equal(t, "done", call("spend-a", "client-a"), "client-a spends its one token")
	require.Equal(t, "done", call("spend-b", "client-b"), "client-b spends its one token")
	before := mcpMetrics(t, g.AdminURL)

	started := make(chan struct{})
	outcomes := hammer(t, strings.TrimPrefix(g.URL, "http://"), wire.ToolCall("storm", "echo"), "client-a", storm, conns, started)
	<-started
	require.Equal(t, "RATE_LIMITED", call("other-key", "client-b"), "another client, refused during the storm")
	require.Equal(t, map[string]int{"RATE_LIMITED": storm}, <-outcomes, "every call of the storm is refused")
	sent := storm + 1

	g.Reload(t, site)
	got := delta(before, mcpMetrics(t, g.AdminURL))
	assert.Equal(t, float64(sent), got[`caddy_mcp_envelopes_total{code="RATE_LIMITED"}`], "the metrics count every refusal")

	info, err := os.Stat(logFile)
	require.NoError(t, err)
	assert.Less(t, info.Size(), int64(100<<10), "%d refusals cost the whole log file under 100 KB", sent)

	lines, sizes := handlerLogLines(t, logFile)
	require.Less(t, len(lines), 100, "a few lines")
	written := 0
	for _, n := range sizes {
		written += n + 1
	}
	t.Logf("the log file: %d bytes; the mcp handler's %d lines: %d bytes", info.Size(), len(lines), written)
	repeated := 0
	firsts := make(map[string][]string)
	for _, l := range lines {
		b, _ := json.Marshal(l)
		t.Logf("%s", b)
		require.Equal(t, "RATE_LIMITED", l["code"], "%s", b)
		require.Equal(t, "storm_per_client", l["limit"], "%s", b)
		key, _ := l["key"].(string)
		switch l["msg"] {
		case "answered with an envelope":
			id, _ := l["id"].(string)
			firsts[key] = append(firsts[key], id)
		case "answered with more envelopes of this kind":
			n, ok := l["repeated"].(float64)
			require.True(t, ok, "a line of counted envelopes says how many: %s", b)
			repeated += int(n)
		default:
			t.Errorf("unexpected line: %s", b)
		}
	}
	assert.Equal(t, map[string][]string{
		shownDigest("client-a"): {"storm"},
		shownDigest("client-b"): {"other-key"},
	}, firsts, "each key's first refusal is logged as ever, with its key as a digest")
	assert.Equal(t, sent, len(firsts[shownDigest("client-a")])+len(firsts[shownDigest("client-b")])+repeated,
		"the refusals logged and the ones counted add up to the refusals sent")
}

// hammer sends body n times from client (its X-Client header) to the mcp
// endpoint at addr, over conns keep-alive connections at once, each sending
// its next request as soon as it has read the last answer. It closes
// started once the first answer is read (or a connection failed), and sends
// on the channel it returns how many answers had each outcome (see
// wire.Outcome), or what went wrong.
func hammer(t *testing.T, addr, body, client string, n, conns int, started chan struct{}) <-chan map[string]int {
	t.Helper()
	req := []byte("POST " + mcptest.MCPPath + " HTTP/1.1\r\nHost: " + addr +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nX-Client: " + client +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	var first sync.Once
	each := make(chan map[string]int, conns)
	for c := range conns {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		go func() {
			seen := make(map[string]int)
			defer func() { each <- seen }()
			defer first.Do(func() { close(started) })
			r := bufio.NewReader(conn)
			for i := c; i < n; i += conns {
				if _, err := conn.Write(req); err != nil {
					seen[err.Error()]++
					return
				}
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					seen[err.Error()]++
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					seen[err.Error()]++
					return
				}
				seen[wire.Outcome(b)]++
				first.Do(func() { close(started) })
			}
		}()
	}
	out := make(chan map[string]int, 1)
	go func() {
		all := make(map[string]int)
		for range conns {
			for k, v := range <-each {
				all[k] += v
			}
		}
		out <- all
	}()
	return out
}

// shownDigest is a key as a log line shows it without log_key: "sha256:"
// and the first 16 hex digits of its SHA-256.
func shownDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])[:16]
}
