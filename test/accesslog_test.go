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

func TestAccessLogCarriesTheMCPPlaceholders(t *testing.T) {
	_, upstream := startRecorder(t)
	accessLog := tempLog(t, "access.log")
	g := mcptest.StartGateway(t, fmt.Sprintf(`log {
	output file %s
	format json
}
log_append mcp_method {http.mcp.method}
log_append mcp_tool {http.mcp.tool}
log_append mcp_id {http.mcp.id}
log_append mcp_session_id {http.mcp.session_id}
log_append mcp_protocol_version {http.mcp.protocol_version}
log_append mcp_error_code {http.mcp.error_code}
mcp {
	rate_limit access_limited {
		key {http.mcp.tool}
		rate 1/1h
		tools limited
	}
}
reverse_proxy %s`, accessLog, strings.TrimPrefix(upstream, "http://")))
	endpoint := g.URL + "/mcp"
	session := withHeader("Mcp-Session-Id", "sess-7", "MCP-Protocol-Version", "2025-11-25")
	post(t, endpoint, wire.ToolCall("forwarded", "limited"), session)
	_, body := post(t, endpoint, wire.ToolCall("refused", "limited"), session)
	require.Equal(t, "RATE_LIMITED", wire.Outcome(body))

	// The access log is written once the response is, after the client
	// may already have read it.
	entries := waitLines(t, accessLog, 2, func(l map[string]any) bool { return l["mcp_id"] != nil })
	require.Len(t, entries, 2)
	for _, e := range entries {
		b, _ := json.Marshal(e)
		t.Logf("%s", b)
	}
	pick := func(e map[string]any) map[string]any {
		out := make(map[string]any)
		for k, v := range e {
			if strings.HasPrefix(k, "mcp_") || k == "status" {
				out[k] = v
			}
		}
		return out
	}
	assert.Equal(t, map[string]any{
		"status": 200.0, "mcp_method": "tools/call", "mcp_tool": "limited", "mcp_id": "forwarded",
		"mcp_session_id": "sess-7", "mcp_protocol_version": "2025-11-25", "mcp_error_code": "",
	}, pick(entries[0]))
	assert.Equal(t, map[string]any{
		"status": 200.0, "mcp_method": "tools/call", "mcp_tool": "limited", "mcp_id": "refused",
		"mcp_session_id": "sess-7", "mcp_protocol_version": "2025-11-25", "mcp_error_code": "RATE_LIMITED",
	}, pick(entries[1]))
}

func TestExpressionMatcherAfterMCPRoutesOneToolToAnotherUpstream(t *testing.T) {
	for name, layout := range map[string]string{
		// Inside route, handlers and their matchers run in the order
		// written.
		"route": `route {
	mcp
	@slow expression {http.mcp.tool} == "slow"
	reverse_proxy @slow %s
	reverse_proxy %s
}`,
		// At the top of a site, mcp is ordered before reverse_proxy, and
		// a route's matchers are evaluated only when the request reaches
		// it, after mcp has read the body: the same works without route.
		"site": `mcp
@slow expression {http.mcp.tool} == "slow"
reverse_proxy @slow %s
reverse_proxy %s`,
	} {
		t.Run(name, func(t *testing.T) {
			recA, upstreamA := startRecorder(t)
			recB, upstreamB := startRecorder(t)
			g := mcptest.StartGateway(t, fmt.Sprintf(layout,
				strings.TrimPrefix(upstreamB, "http://"), strings.TrimPrefix(upstreamA, "http://")))
			endpoint := g.URL + "/mcp"
			for _, body := range []string{
				wire.ToolCall("1", "slow"),
				wire.ToolCall("2", "echo"),
				`{"jsonrpc":"2.0","id":"3","method":"tools/list"}`,
				wire.ToolCall("4", "slow"),
				wire.ToolCall("5", "slower"),
			} {
				resp, _ := post(t, endpoint, body)
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			assert.Equal(t, []string{"1", "4"}, idsReceived(t, recB), "the slow tool goes to upstream B")
			assert.Equal(t, []string{"2", "3", "5"}, idsReceived(t, recA), "everything else goes to upstream A")
		})
	}
}

// idsReceived are the ids of the JSON-RPC messages rec received, in order.
func idsReceived(t *testing.T, rec *recorder) []string {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ids := []string{}
	for _, r := range rec.requests {
		var msg struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(r.body, &msg), "%s", r.body)
		ids = append(ids, msg.ID)
	}
	return ids
}

// Bodies of 4 KiB and more are read into recycled buffers; the placeholders
// the access log reads after the handler returns must not come from a
// buffer another request has taken.
func TestAccessLogPlaceholdersOfLargeBodiesSurviveBufferReuse(t *testing.T) {
	rec, upstream := startRecorder(t)
	accessLog := tempLog(t, "access.log")
	g := mcptest.StartGateway(t, fmt.Sprintf(`log {
	output file %s
	format json
}
log_append mcp_tool {http.mcp.tool}
log_append mcp_id {http.mcp.id}
mcp
reverse_proxy %s`, accessLog, strings.TrimPrefix(upstream, "http://")))
	const calls = 20
	sent := make(map[string]string)
	for i := range calls {
		id, tool := fmt.Sprintf("big-%02d", i), fmt.Sprintf("tool_%02d", i)
		big := strings.Repeat(fmt.Sprintf("%02d", i), 8<<10)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q}}}`, id, tool, big)
		sent[id] = tool
		post(t, g.URL+"/mcp", body)
		assert.Equal(t, body, string(rec.last(t).body), "the upstream receives each body byte for byte")
	}
	entries := waitLines(t, accessLog, calls, func(l map[string]any) bool { return l["mcp_id"] != nil })
	for _, e := range entries {
		id, _ := e["mcp_id"].(string)
		assert.Equal(t, sent[id], e["mcp_tool"], "entry %v", e)
	}
}
