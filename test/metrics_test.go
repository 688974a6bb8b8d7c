package test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// The metrics are process-wide counters: every test compares two scrapes
// and asserts on the difference, so what other tests counted before does
// not matter. The limit and guard names are unique to each test.

func TestMetricsCountEveryOutcomeOfAScriptedRun(t *testing.T) {
	h := startUpstream(t, holdCallsOf("hold"))
	down := mcptest.FreeLoopbackAddr(t)
	// Calls of the tool "down" go to an address nobody listens on.
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: fmt.Sprintf(`route {
	mcp {
		rate_limit metrics_limited {
			key {http.mcp.tool}
			rate 2/1h
			tools limited
		}
		concurrency metrics_guard {
			max 1
			queue 1
			queue_timeout 1m
		}
	}
	@down expression {http.mcp.tool} == "down"
	reverse_proxy @down %s
	reverse_proxy %s
}`, down, h.addr)})
	endpoint := g.URL + "/mcp"
	call := func(id, tool string) string {
		t.Helper()
		_, body := post(t, endpoint, wire.ToolCall(id, tool))
		return wire.Outcome(body)
	}
	before := mcpMetrics(t, g.AdminURL)
	assert.Equal(t, 0.0, before[`caddy_mcp_inflight{guard="metrics_guard"}`], "the guard exists, idle, from the start")

	for i := range 3 {
		assert.Equal(t, "done", call(fmt.Sprint("echo-", i), "echo"))
	}
	assert.Equal(t, "done", call("limited-1", "limited"))
	assert.Equal(t, "done", call("limited-2", "limited"))
	assert.Equal(t, "RATE_LIMITED", call("limited-3", "limited"))

	// One call holds the only place, one waits for it, and a third finds
	// the queue full.
	held := postAsync(t, endpoint, wire.ToolCall("held", "hold"))
	h.waitHeld(t, 1)
	queued := postAsync(t, endpoint, wire.ToolCall("queued", "echo"))
	gaugesReach(t, g.AdminURL, map[string]float64{
		`caddy_mcp_inflight{guard="metrics_guard"}`: 1,
		`caddy_mcp_queued{guard="metrics_guard"}`:   1,
	})
	assert.Equal(t, "SERVER_BUSY", call("shed", "echo"))
	h.release(1)
	assert.Equal(t, "done", receive(t, held))
	assert.Equal(t, "done", receive(t, queued))
	gaugesReach(t, g.AdminURL, map[string]float64{
		`caddy_mcp_inflight{guard="metrics_guard"}`: 0,
		`caddy_mcp_queued{guard="metrics_guard"}`:   0,
	})

	assert.Equal(t, "HANDOFF_UPSTREAM_UNAVAILABLE", call("down", "down"))
	resp, _ := post(t, endpoint, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	get, err := http.Get(endpoint)
	require.NoError(t, err)
	get.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, get.StatusCode, "the upstream's answer to GET passes through")

	got := delta(before, mcpMetrics(t, g.AdminURL))
	assert.Equal(t, map[string]float64{
		// echo ×3, limited ×2, held, queued
		`caddy_mcp_requests_total{method="tools/call",outcome="forwarded"}`:                    7,
		`caddy_mcp_requests_total{method="tools/call",outcome="RATE_LIMITED"}`:                 1,
		`caddy_mcp_requests_total{method="tools/call",outcome="SERVER_BUSY"}`:                  1,
		`caddy_mcp_requests_total{method="tools/call",outcome="HANDOFF_UPSTREAM_UNAVAILABLE"}`: 1,
		`caddy_mcp_requests_total{method="tools/list",outcome="forwarded"}`:                    1,
		`caddy_mcp_requests_total{method="GET",outcome="forwarded"}`:                           1,

		`caddy_mcp_envelopes_total{code="RATE_LIMITED"}`:                 1,
		`caddy_mcp_envelopes_total{code="SERVER_BUSY"}`:                  1,
		`caddy_mcp_envelopes_total{code="HANDOFF_UPSTREAM_UNAVAILABLE"}`: 1,

		`caddy_mcp_ratelimit_decisions_total{decision="allowed",limit="metrics_limited"}`: 2,
		`caddy_mcp_ratelimit_decisions_total{decision="denied",limit="metrics_limited"}`:  1,

		// Every POST; a GET is not timed.
		`caddy_mcp_request_duration_seconds_count{method="tools/call"}`: 10,
		`caddy_mcp_request_duration_seconds_count{method="tools/list"}`: 1,
		// Every tools/call that asked the guard for a place: all but the
		// rate-limited one.
		`caddy_mcp_queue_wait_seconds_count{method="tools/call"}`: 9,

		// The tool "limited" has spent its bucket; every other bucket is full
		// and so dropped.
		`caddy_mcp_ratelimit_buckets{limit="metrics_limited"}`: 1,
	}, got)
}

func TestMetricSeriesDoNotGrowWithToolsMethodsOrSessions(t *testing.T) {
	upstream := startUpstream(t).addr
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: `mcp {
	rate_limit cardinality_per_session {
		key {http.mcp.session_id}
		rate 1000/1s
	}
	concurrency cardinality_per_tool {
		max 10
		key {http.mcp.tool}
	}
}
reverse_proxy ` + upstream})
	endpoint := g.URL + "/mcp"
	random := func(prefix string) string { return fmt.Sprintf("%s%d", prefix, rand.IntN(1_000_000_000)) }
	traffic := func(n int) {
		for i := range n {
			session := random("rnd-session-")
			resp, body := post(t, endpoint, wire.ToolCall(fmt.Sprint("c", i), random("rnd-tool-")), withHeader("Mcp-Session-Id", session))
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			require.Equal(t, "done", wire.Outcome(body))
			resp, body = post(t, endpoint, fmt.Sprintf(`{"jsonrpc":"2.0","id":"m%d","method":%q}`, i, random("x/")), withHeader("Mcp-Session-Id", session))
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		}
	}
	// One of each first, so that every series this traffic makes exists.
	traffic(1)
	before := mcpMetrics(t, g.AdminURL)
	traffic(200)
	after := mcpMetrics(t, g.AdminURL)

	keys := func(m map[string]float64) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, keys(before), keys(after), "200 new tool names, methods and sessions make no new series")
	for _, k := range keys(after) {
		assert.NotContains(t, k, "rnd-", "a client-chosen value became a label: %s", k)
		assert.NotContains(t, k, "x/", "a method outside the specification became a label: %s", k)
	}
	d := delta(before, after)
	assert.Equal(t, 200.0, d[`caddy_mcp_requests_total{method="tools/call",outcome="forwarded"}`])
	assert.Equal(t, 200.0, d[`caddy_mcp_requests_total{method="other",outcome="forwarded"}`], "methods outside the specification are counted as other")
	assert.Equal(t, 200.0, d[`caddy_mcp_ratelimit_decisions_total{decision="allowed",limit="cardinality_per_session"}`])
	assert.Contains(t, after, `caddy_mcp_ratelimit_buckets{limit="cardinality_per_session"}`)
	assert.Contains(t, after, `caddy_mcp_inflight{guard="cardinality_per_tool"}`)
}
