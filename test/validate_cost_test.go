package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// toolsServer lists tools (the JSON of a tools array) as an MCP server of
// the 2025 revisions does, and answers calls "ran" when they reach it. It
// reads a request's id and method only, and discards the rest unread: what
// the test process spends on a call is the gateway's. Its tools are
// forgotten (forgetTools) when the test ends.
func toolsServer(t *testing.T, tools string) *toolsUpstream {
	u := &toolsUpstream{}
	u.tools.Store(&tools)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, method := idAndMethod(r.Body)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if method == "tools/list" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}`, id, *u.tools.Load())
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ran"}]}}`, id)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

// toolsUpstream is a toolsServer.
type toolsUpstream struct {
	URL   string
	tools atomic.Pointer[string]
}

// forgetTools has the tools the gateway at url learned from u replaced by
// an empty list when the test ends: the catalog is the process's, and
// megabytes of lists left in it would take the place of the next tests'
// (max_catalog_size).
func (u *toolsUpstream) forgetTools(t *testing.T, url string) {
	t.Cleanup(func() {
		none := "[]"
		u.tools.Store(&none)
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Errorf("forgetting the tools: %v", err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
}

// idAndMethod reads a JSON-RPC request's members up to its params: the
// tests' requests write id and method first.
func idAndMethod(r io.Reader) (id, method string) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return "null", ""
	}
	for dec.More() {
		name, err := dec.Token()
		if err != nil || name == "params" {
			break
		}
		v, err := dec.Token()
		if err != nil {
			break
		}
		switch name {
		case "id":
			b, _ := json.Marshal(v)
			id = string(b)
		case "method":
			method, _ = v.(string)
		}
	}
	if id == "" {
		id = "null"
	}
	return id, method
}

// processCPU is the CPU time the test process (the gateway, its clients
// and upstreams) has used.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// callCPU bounds what the gateway may spend on one call, whatever the
// schema its upstream listed.
const callCPU = 100 * time.Millisecond * raceSlowdown

// jsonArray writes a JSON array of n items.
func jsonArray(n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(i))
	}
	b.WriteByte(']')
	return b.String()
}

// jsonObject writes a JSON object of n members.
func jsonObject(n int, member func(i int) string) string {
	return "{" + strings.Trim(jsonArray(n, member), "[]") + "}"
}

// fanningSchema refers twice to the level below, levels times over.
func fanningSchema(keyword string, levels int, leaf string) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"d0":` + leaf)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, `,"d%d":{"%s":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, keyword, i-1, i-1)
	}
	fmt.Fprintf(&b, `},"$ref":"#/$defs/d%d"}`, levels)
	return b.String()
}

// costlyTools are schemas an upstream may list whose calls cost the
// gateway far more than their bytes.
func costlyTools() string {
	tools := []string{
		`{"name":"rate","inputSchema":{"type":"object","properties":{"ratings":{"type":"array","items":{"type":"integer","enum":[1,2,3,4,5]}}},"required":["ratings"]}}`,
		`{"name":"grep","inputSchema":{"type":"object","properties":{"patterns":{"type":"array","items":{"type":"string","format":"regex"}}}}}`,
		`{"name":"pick","inputSchema":{"type":"object","properties":{"n":{"type":"array","items":{"enum":` + jsonArray(12000, strconv.Itoa) + `}}}}}`,
		`{"name":"tag","inputSchema":{"type":"object","patternProperties":` + jsonObject(2018, func(i int) string {
			return fmt.Sprintf(`"x%04d":{"type":"integer"}`, i)
		}) + `}}`,
		`{"name":"tag_anchored","inputSchema":{"type":"object","patternProperties":` + jsonObject(2018, func(i int) string {
			return fmt.Sprintf(`"^x%04d$":{"type":"integer"}`, i)
		}) + `}}`,
		`{"name":"all_of","inputSchema":` + fanningSchema("allOf", 18, `{"type":"object"}`) + `}`,
		`{"name":"any_of","inputSchema":` + fanningSchema("anyOf", 16, `{"type":"string"}`) + `}`,
	}
	return "[" + strings.Join(tools, ",") + "]"
}

// Finding: checking a call cost the gateway what the schema made it cost,
// not what the call's bytes allowed: 80,000 numbers against an enum of 1
// to 5 took 450-610 ms of CPU, 2,000 "regex" strings of \p{L} 2.1-3.7 s,
// 100 numbers against a 12,000-value enum 1.15-1.55 s, 20,000 names against
// 2,018 patternProperties 2.6-3.7 s, {} against 18 levels of allOf 440-620
// ms, against 16 levels of anyOf 430-680 ms. Each now costs the gateway
// under 100 ms: checked, its schema refused when it is listed, or passed
// unchecked at the budget's end.
func TestCostlyCallsCostTheGatewayLittleCPU(t *testing.T) {
	ratings := func(n int) string {
		return `{"ratings":` + jsonArray(n, func(i int) string { return strconv.Itoa(1 + i%5) }) + `}`
	}
	twentyThousandNames := jsonObject(20000, func(i int) string { return fmt.Sprintf(`"k%05d":0`, i) })
	upstream := toolsServer(t, costlyTools())
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Site:  "mcp {\n\tmax_request_body 8MiB\n\tvalidate\n}\n" + mcptest.ProxyTo(upstream.URL),
		Admin: true,
	})
	url := g.URL + "/mcp"
	upstream.forgetTools(t, url)
	runtime.GC()
	cpu := processCPU(t)
	require.Contains(t, postAs(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), `"tools"`)
	t.Logf("the process's CPU time for the list: %v", processCPU(t)-cpu)
	// The first body of 4 MiB grows the heap and the buffers that read and
	// forward it, whatever is checked: 50 to 110 ms of CPU without
	// validate. Calls are measured on a gateway past that, as one serving
	// is.
	warm := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"all_of","arguments":` + ratings(2<<20) + `}}`
	require.Contains(t, postAs(t, url, "", warm), `"ran"`)
	for _, c := range []struct {
		name, tool, args string
		outcome, answer  string
	}{
		{"an array of integer items with enum [1..5]: 80,000 numbers", "rate", ratings(80000), "valid", `"ran"`},
		{"the same, 4 MiB of numbers", "rate", ratings(2 << 20), "over_budget", `"ran"`},
		{"the same, 4 MiB of numbers of 20 characters", "rate", `{"ratings":` + jsonArray(4<<20/21, func(i int) string { return strconv.Itoa(1+i%5) + ".000000000000000000" }) + `}`, "over_budget", `"ran"`},
		{"format regex: 2,000 times [\\p{L}]{999}", "grep", `{"patterns":` + jsonArray(2000, func(int) string { return `"[\\p{L}]{999}"` }) + `}`, "valid", `"ran"`},
		{"a 12,000-value numeric enum: 100 numbers", "pick", `{"n":` + jsonArray(100, func(int) string { return "-1" }) + `}`, "invalid", `Not an allowed value. You sent: -1.`},
		{"2,018 patternProperties found anywhere in a name: 20,000 names", "tag", twentyThousandNames, "over_budget", `"ran"`},
		{"2,018 patternProperties anchored by a literal: 20,000 names", "tag_anchored", twentyThousandNames, "valid", `"ran"`},
		{"allOf of $ref, 18 levels", "all_of", `{}`, "unchecked", `"ran"`},
		{"anyOf fan-out, 16 levels", "any_of", `{}`, "unchecked", `"ran"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + c.args + `}}`
			before := mcpMetrics(t, g.AdminURL)

			runtime.GC()
			cpu := processCPU(t)
			answer := postAs(t, url, "", body)
			cpu = processCPU(t) - cpu
			t.Logf("the process's CPU time for the call of %d bytes: %v", len(body), cpu)
			assert.Less(t, cpu, callCPU, "the process's CPU time for the call")
			assert.Contains(t, answer, c.answer)
			assert.Equal(t, map[string]float64{`caddy_mcp_validations_total{outcome="` + c.outcome + `"}`: 1},
				validationsIn(delta(before, mcpMetrics(t, g.AdminURL))))
		})
	}
}

// validationsIn are the caddy_mcp_validations_total series of metrics.
func validationsIn(metrics map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range metrics {
		if strings.HasPrefix(k, "caddy_mcp_validations_total") {
			out[k] = v
		}
	}
	return out
}

// Checking a call costs what its bytes allow, whatever the schema the
// upstream listed: past its budget, the call passes unchecked, as one
// whose tool the gateway does not know, counted and logged once a minute.
func TestACallTooCostlyToCheckPassesUncheckedAndIsCounted(t *testing.T) {
	tools := `[{"name":"tag","inputSchema":{"type":"object","patternProperties":` + jsonObject(2018, func(i int) string {
		return fmt.Sprintf(`"x%04d":{"type":"integer"}`, i)
	}) + `}},
		{"name":"rate","inputSchema":{"type":"object","properties":{"ratings":{"type":"array","items":{"type":"integer","enum":[1,2,3,4,5]}}}}}]`
	logFile := tempLog(t, "caddy.log")
	upstream := toolsServer(t, tools)
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Site:  "mcp {\n\tvalidate\n}\n" + mcptest.ProxyTo(upstream.URL),
		Admin: true,
		Log:   "output file " + logFile + "\nformat json\nlevel WARN",
	})
	url := g.URL + "/mcp"
	upstream.forgetTools(t, url)
	call := func(tool, args string) string {
		return postAs(t, url, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
	}
	postAs(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	before := mcpMetrics(t, g.AdminURL)

	keys := jsonObject(20000, func(i int) string { return fmt.Sprintf(`"k%05d":0`, i) })
	assert.Contains(t, call("tag", keys), `"ran"`, "passed unchecked")
	assert.Contains(t, call("tag", keys), `"ran"`)
	assert.Contains(t, call("rate", `{"ratings":[1,2,6]}`), `<field name=\"ratings.2\">Not an allowed value. You sent: 6. Expected one of: 1, 2, 3, 4, 5.</field>`,
		"an ordinary call is checked")
	assert.Equal(t, map[string]float64{
		`caddy_mcp_validations_total{outcome="over_budget"}`: 2,
		`caddy_mcp_validations_total{outcome="invalid"}`:     1,
	}, validationsIn(delta(before, mcpMetrics(t, g.AdminURL))))

	var lines []map[string]any
	for _, l := range jsonLines(t, logFile) {
		if strings.Contains(fmt.Sprint(l["msg"]), "budget") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "the first logged, the second counted for the line of the minute's end")
	assert.Equal(t, "tag", lines[0]["tool"])
}

// Finding: a 128-character unknown tool name, compared with 5,000 listed
// names of 250 characters for the nearest ones, cost the gateway 410-480 ms
// of CPU. The search is bounded by the names' lengths and number.
func TestNearestNamesCostTheGatewayLittleCPU(t *testing.T) {
	tools := make([]string, 5000)
	for i := range tools {
		tools[i] = fmt.Sprintf(`{"name":"%05d%s","inputSchema":{"type":"object"}}`, i, strings.Repeat("n", 245))
	}
	upstream := toolsServer(t, "["+strings.Join(tools, ",")+"]")
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Site:  "mcp {\n\tvalidate\n}\n" + mcptest.ProxyTo(upstream.URL),
		Admin: true,
	})
	url := g.URL + "/mcp"
	upstream.forgetTools(t, url)
	require.Contains(t, postAs(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), `"tools"`)
	before := mcpMetrics(t, g.AdminURL)

	runtime.GC()
	cpu := processCPU(t)
	answer := postAs(t, url, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+strings.Repeat("q", 128)+`","arguments":{}}}`)
	cpu = processCPU(t) - cpu
	t.Logf("the process's CPU time for the call: %v", cpu)
	assert.Less(t, cpu, callCPU, "the process's CPU time for the call")
	assert.Contains(t, answer, "UNKNOWN_ACTION")
	assert.Contains(t, answer, "<available_actions>")
	assert.Equal(t, map[string]float64{`caddy_mcp_validations_total{outcome="unknown_tool"}`: 1},
		validationsIn(delta(before, mcpMetrics(t, g.AdminURL))))
}
