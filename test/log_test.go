package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
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
