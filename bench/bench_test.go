package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // the caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/caddymcp/caddy-mcp" // the mcp directive
)

func TestEveryValueFallsInsideItsBucket(t *testing.T) {
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 123_456, 1 << 40, 1<<63 - 1} {
		low, width := bucketBounds(bucketOf(v))
		assert.True(t, low <= v && v-low < width, "%d in bucket [%d, %d+%d)", v, low, low, width)
		assert.LessOrEqual(t, width, max(1, v>>subBits), "bucket of %d too wide", v)
	}
}

func TestPercentilesAreWithinTheHistogramsPrecision(t *testing.T) {
	var h histogram
	for i := 1; i <= 10_000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Millisecond}, {0.99, 9900 * time.Microsecond}, {0.999, 9990 * time.Microsecond}} {
		got := h.percentile(c.q)
		assert.InEpsilon(t, float64(c.want), float64(got), 1.0/(1<<subBits), "p%g", 100*c.q)
	}
	assert.Equal(t, time.Microsecond, h.percentile(0), "the smallest value recorded")
	assert.Equal(t, 10*time.Millisecond, h.percentile(1), "the largest value recorded")
}

func TestMergedHistogramsCountEveryValue(t *testing.T) {
	var a, b histogram
	for range 99 {
		a.record(time.Millisecond)
	}
	b.record(time.Second)
	a.merge(&b)
	assert.Equal(t, uint64(100), a.n)
	assert.InEpsilon(t, float64(time.Millisecond), float64(a.percentile(0.99)), 0.02)
	assert.Equal(t, time.Second, a.percentile(1))
}

func TestBodiesAreToolCallsOfTheSizeAsked(t *testing.T) {
	for _, size := range []int{1 << 10, 64 << 10, 1000} {
		b := body(size)
		require.Len(t, b, size)
		var msg struct {
			ID     int    `json:"id"`
			Method string `json:"method"`
			Params struct {
				Name      string            `json:"name"`
				Arguments map[string]string `json:"arguments"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal(b, &msg), "body of %d bytes", size)
		assert.Equal(t, "tools/call", msg.Method)
		assert.Equal(t, "echo", msg.Params.Name)
		assert.True(t, strings.HasPrefix(msg.Params.Arguments["text"], "The gateway reads"))
	}
}

// TestEveryCaddyfileAdapts checks the configurations against the real
// Caddyfile adapter and the mcp directive: each holds what its name says.
func TestEveryCaddyfileAdapts(t *testing.T) {
	want := map[string][]string{
		cfgProxy:      {`"handler":"reverse_proxy"`, `"dial":"127.0.0.1:9000"`, `"listen":["127.0.0.1:8080"]`, `"host":["127.0.0.1"]`},
		cfgMCP:        {`"handler":"mcp"`, `"handler":"reverse_proxy"`},
		cfgSessions:   {`"sessions":{"secrets":["` + sessionSecret + `"]}`, `"selection_policy":{"fallback":{"policy":"round_robin"},"policy":"mcp_session"}`},
		cfgLimits1:    {`"per_client":{"burst":1000000000,"key":"{http.request.header.X-Client}","rate":"1/1h"}`, `"per_client_tool":`, `{http.mcp.tool}`},
		cfgLimits100k: {`"per_client":`, `"per_client_tool":`},
		cfgRedis1:     {`"per_client":{"burst":1000000000,"key":"{http.request.header.X-Client}","rate":"1/1h"}`, `"per_client_tool":`, `"backend":"redis"`, `"addresses":["redis://127.0.0.1:6379/0"]`},
		cfgRedis100k:  {`"per_client":`, `"per_client_tool":`, `"backend":"redis"`},
		cfgGuard:      {`"concurrency":{"max":1000}`},
		cfgTools:      {`"tools":{"deny":["admin_*","*delete*"]`, `"timeouts":[{"after":60000000000,"tools":"*"}]`},
		cfgDenied:     {`"deny":{"burst":1,"rate":"1/1h"}`},
		cfgSDKMCP:     {`"handler":"mcp"`},
		cfgSlowList:   {`"handler":"mcp"`, `"dial":"127.0.0.1:9000"`},
		cfgFedCall:    {`"federation":{"servers":[{"name":"first"`, `"name":"second"`, `"name":"slow"`, `"dial":"127.0.0.1:9001"`, `"dial":"127.0.0.1:9002"`, `"dial":"127.0.0.1:9003"`},
		cfgFedList:    {`"federation":{"servers":[{"name":"first"`, `"dial":"127.0.0.1:9003"`},
		cfgCredential: {`"handler":"mcp_credential"`, `"use":"token_exchange"`, `"token_endpoint":"http://127.0.0.1:9999/token"`, `"audience":"https://upstream.bench"`, `"client":{"id":"bench-gateway"`},
	}
	marks := map[string]string{
		redisAddrMark: "127.0.0.1:6379", issuerMark: "http://127.0.0.1:9999",
		responderMark: "127.0.0.1:9001", secondMark: "127.0.0.1:9002", slowMark: "127.0.0.1:9003",
	}
	for _, c := range allConfigs(1000) {
		if c.Direct || c.Peer {
			// The peer's rate_limit is registered only in the peer's own
			// Caddy (bench/peer), which the bench builds when it runs one.
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			text := caddyfile(c, 8080, 2019, t.TempDir(), "127.0.0.1:9000", marks)
			adapted, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
			require.NoError(t, err, text)
			for _, w := range warnings {
				assert.Contains(t, w.Message, "not formatted", "warning: %s", w)
			}
			cfg := string(adapted)
			assert.Contains(t, cfg, `"admin":{"listen":"127.0.0.1:2019"`)
			for _, s := range want[c.Name] {
				assert.Contains(t, cfg, s)
			}
			if c.Handler == "" {
				assert.NotContains(t, cfg, `"handler":"mcp"`)
			}
			if !c.Redis {
				assert.NotContains(t, cfg, `"store"`)
			}
			if c.Proxy == "" {
				assert.NotContains(t, cfg, `"selection_policy"`)
			}
			if !c.Sessions {
				assert.NotContains(t, cfg, `"sessions"`)
			}
			if c.Federated {
				// The servers' own routes reach the upstreams: the site
				// has no reverse_proxy to the one every other has.
				assert.NotContains(t, cfg, `"dial":"127.0.0.1:9000"`)
			} else {
				assert.NotContains(t, cfg, `"federation"`)
			}
		})
	}
}

func TestSelectingAConfigurationRunsItsBaseline(t *testing.T) {
	sel, err := selectConfigs("sdk-mcp,sse", allConfigs(1000))
	require.NoError(t, err)
	assert.True(t, sel.SSE)
	require.Len(t, sel.Throughput, 1)
	assert.Equal(t, cfgSDKMCP, sel.Throughput[0].Name)
	var running []string
	for _, c := range sel.Running {
		running = append(running, c.Name)
	}
	assert.Equal(t, []string{cfgDirect, cfgProxy, cfgMCP, cfgSDKProxy, cfgSDKMCP}, running)

	_, err = selectConfigs("mcp,nope", allConfigs(1000))
	assert.ErrorContains(t, err, `"nope"`)

	sel, err = selectConfigs("sessions", allConfigs(1000))
	require.NoError(t, err)
	running = nil
	for _, c := range sel.Running {
		running = append(running, c.Name)
	}
	assert.Equal(t, []string{cfgMCPSession, cfgSessions}, running, "sessions is compared with mcp {} carrying the same session")
}

func TestSessionsIsMeasuredRightAfterItsUnsealedTwin(t *testing.T) {
	all := allConfigs(1000)
	for i, c := range all {
		if c.Name == cfgSessions {
			require.Positive(t, i)
			twin := all[i-1]
			assert.Equal(t, cfgMCPSession, twin.Name)
			assert.Equal(t, cfgMCPSession, c.Baseline)
			assert.True(t, c.Sessions && c.Sealed)
			assert.True(t, twin.Sessions && !twin.Sealed)
			assert.Equal(t, "mcp", twin.Handler)
			assert.GreaterOrEqual(t, len(sessionSecret), 32)
			return
		}
	}
	t.Fatal("no sessions configuration")
}

func TestSessionsAreComparedWithMCP(t *testing.T) {
	all := allConfigs(1000)
	smp := func(requests uint64, p50 time.Duration) *sample {
		s := &sample{Requests: requests, Window: time.Second}
		s.hist.record(p50)
		return s
	}
	named := func(name string) config {
		i := slices.IndexFunc(all, func(c config) bool { return c.Name == name })
		require.GreaterOrEqual(t, i, 0, name)
		return all[i]
	}
	proxy := &series{Config: named(cfgProxy), Size: 1024, Samples: []*sample{smp(1000, time.Millisecond)}}
	mcp := &series{Config: named(cfgMCPSession), Size: 1024, Samples: []*sample{smp(900, 1100*time.Microsecond)}}
	sessions := &series{Config: named(cfgSessions), Size: 1024, Samples: []*sample{smp(891, 1133*time.Microsecond)}}
	require.Equal(t, cfgMCPSession, mcp.Config.Name)
	require.Equal(t, cfgSessions, sessions.Config.Name)
	rows := summarise([]*series{proxy, mcp, sessions})
	r := findRow(rows, cfgSessions, 1024)
	require.NotNil(t, r)
	assert.InDelta(t, 0.99, r.Ratio.Median, 1e-9, "against mcp {}, not reverse_proxy")
	assert.InDelta(t, 3, r.AddedP50.Median, 1.6)

	found := map[string]goal{}
	for _, g := range goals(rows, nil, []int{1024}) {
		found[g.What] = g
	}
	tp, p50 := found["throughput, sessions / mcp {} with the session unsealed (within noise), 1 KiB"], found["p50 added, sessions over mcp {} with the session unsealed (within noise), 1 KiB"]
	assert.Equal(t, 0.97, tp.Bound)
	assert.True(t, tp.Met)
	assert.Equal(t, 5.0, p50.Bound)
	assert.True(t, p50.AtMost)
	assert.True(t, p50.Met)

	var out strings.Builder
	(&report{Rows: rows}).writeRows(&out)
	assert.Contains(t, out.String(), "| sessions (against mcp {} with the session unsealed) | 1 KiB |")
}

// TestResponderKeepsOneSession: the responder answers as the Go SDK's
// server in stateful mode would, with one session.
func TestResponderKeepsOneSession(t *testing.T) {
	up, err := serveUpstreams()
	require.NoError(t, err)
	defer up.stop()
	post := func(sid string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, "http://"+up.Responder+"/mcp", strings.NewReader(string(body(1024))))
		require.NoError(t, err)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := post("")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, responderSessionID, resp.Header.Get("Mcp-Session-Id"), "a new session")
	resp = post(responderSessionID)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, responderSessionID, resp.Header.Get("Mcp-Session-Id"), "the same session")
	assert.Equal(t, 404, post("a-token-the-gateway-did-not-open").StatusCode)
}

// TestOpeningASessionNeedsASealedToken opens a session directly at the
// responder, which names its own id, and through a stand-in gateway that
// seals and restores it.
func TestOpeningASessionNeedsASealedToken(t *testing.T) {
	up, err := serveUpstreams()
	require.NoError(t, err)
	defer up.stop()
	_, err = openSession(up.Responder, true)
	assert.ErrorContains(t, err, "own session id")
	raw, err := openSession(up.Responder, false)
	require.NoError(t, err, "the unsealed twin's session")
	assert.Equal(t, responderSessionID, raw)

	upstream, err := url.Parse("http://" + up.Responder)
	require.NoError(t, err)
	const sealed = "sealed-"
	gw := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			if v := r.In.Header.Get("Mcp-Session-Id"); v != "" {
				r.Out.Header.Set("Mcp-Session-Id", strings.TrimPrefix(v, sealed))
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if v := resp.Header.Get("Mcp-Session-Id"); v != "" {
				resp.Header.Set("Mcp-Session-Id", sealed+v)
			}
			return nil
		},
	})
	defer gw.Close()
	token, err := openSession(strings.TrimPrefix(gw.URL, "http://"), true)
	require.NoError(t, err)
	assert.Equal(t, sealed+responderSessionID, token)

	c := newClient(&target{addr: strings.TrimPrefix(gw.URL, "http://"), path: "/mcp", body: body(1024), keys: 1, headers: sessionLines(token), expect: upstreamText}, 0, 1)
	defer c.close()
	assert.Contains(t, string(c.head), "\r\nMcp-Session-Id: "+token+"\r\nMCP-Protocol-Version: 2025-11-25\r\nX-Client: k")
	for range 3 {
		require.NoError(t, c.do(), "every request names the session")
	}
	stale := newClient(&target{addr: up.Responder, path: "/mcp", body: body(1024), keys: 1, headers: sessionLines(token), expect: upstreamText}, 0, 1)
	defer stale.close()
	assert.ErrorIs(t, stale.do(), errBadAnswer, "a token the upstream gets unopened is not its session")
}

func TestRedisConfigurationsHaveTheInProcessLimits(t *testing.T) {
	all := allConfigs(1000)
	for _, c := range all {
		if !c.Redis {
			continue
		}
		var in config
		for _, o := range all {
			if o.Name == c.InProcess {
				in = o
			}
		}
		require.NotEmpty(t, in.Name, "%s: in-process configuration %q", c.Name, c.InProcess)
		assert.Equal(t, in.Keys, c.Keys, c.Name)
		assert.Equal(t, strings.Replace(c.Handler, "\tstore redis {\n\t\taddress redis://"+redisAddrMark+"/0\n\t}\n", "", 1), in.Handler,
			"%s: the limits of %s and a store block", c.Name, in.Name)
	}
}

func TestMissingRedisSkipsOrFails(t *testing.T) {
	o := options{redisBin: "redis-server-that-is-not-installed"}
	sel, err := selectConfigs("all", allConfigs(1000))
	require.NoError(t, err)
	require.True(t, sel.needsRedis())
	rest, note, err := findRedis(&o, sel)
	require.NoError(t, err, "all: the rest still runs")
	assert.False(t, rest.needsRedis())
	assert.Len(t, rest.Throughput, len(sel.Throughput)-2)
	assert.Contains(t, note, "limits-1key-redis and limits-100k-redis not measured")
	assert.Contains(t, note, "apt-get install redis-server")

	named, err := selectConfigs("reverse_proxy,limits-1key-redis", allConfigs(1000))
	require.NoError(t, err)
	_, _, err = findRedis(&o, named)
	assert.ErrorContains(t, err, "limits-1key-redis")
	assert.ErrorContains(t, err, "apt-get install redis-server")

	none, err := selectConfigs("reverse_proxy,limits-1key", allConfigs(1000))
	require.NoError(t, err)
	assert.False(t, none.needsRedis())
}

func TestRedisFiguresArePerAdmittedRequest(t *testing.T) {
	assert.Equal(t, uint64(12), commandCalls("calls=12,usec=34,usec_per_call=2.83,rejected_calls=0,failed_calls=0"))
	assert.Zero(t, commandCalls(""))
	// 1000 requests, each two scripts; the INFO of the first read shows in
	// the second.
	u := useBetween(redisCounters{Commands: 50, Scripts: 40, Info: 3}, redisCounters{Commands: 2051, Scripts: 2040, Info: 4}, 1000)
	u.RoundTrips = 1000
	cmds, scripts, trips := u.perRequest()
	assert.InDelta(t, 2.0, cmds, 1e-9)
	assert.InDelta(t, 2.0, scripts, 1e-9)
	assert.InDelta(t, 1.0, trips, 1e-9, "two scripts in one pipeline")

	all := allConfigs(1000)
	cfg := func(name string) config {
		for _, c := range all {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no configuration %s", name)
		return config{}
	}
	smp := func(p50 time.Duration, use *redisUse) *sample {
		s := &sample{Requests: 1000, Window: time.Second, Redis: use}
		s.hist.record(p50)
		return s
	}
	in := &series{Config: cfg(cfgLimits1), Size: 1024, Samples: []*sample{smp(500*time.Microsecond, nil), smp(time.Millisecond, nil)}}
	red := &series{Config: cfg(cfgRedis1), Size: 1024, Samples: []*sample{
		smp(600*time.Microsecond, &redisUse{Commands: 1000, Scripts: 1000, RoundTrips: 1000, Answered: 1000}),
		smp(1200*time.Microsecond, &redisUse{Commands: 1000, Scripts: 1000, RoundTrips: 1000, Answered: 1000}),
	}}
	rows := summarise([]*series{in, red})
	r := findRow(rows, cfgRedis1, 1024)
	require.NotNil(t, r)
	require.NotNil(t, r.AddedP50InProcess)
	assert.InDelta(t, 150, r.AddedP50InProcess.Median, 10, "round by round: +100 µs and +200 µs")
	require.NotNil(t, r.RedisRoundTrips)
	assert.Equal(t, 1.0, r.RedisRoundTrips.Median)

	var whats []string
	for _, g := range goals(rows, nil, []int{1024}) {
		whats = append(whats, g.What)
		if g.Unit == unitPerRequest {
			assert.True(t, g.Met, "one round trip per request")
			assert.Equal(t, kindCount, g.Kind)
		}
	}
	assert.Contains(t, whats, "p50 added, limits-1key-redis over limits-1key (buckets in process), 1 KiB")
	assert.Contains(t, whats, "Redis round trips per admitted request, limits-1key-redis, 1 KiB")
}

func TestStoreDecisionsAreReadFromTheMetrics(t *testing.T) {
	page := `# HELP caddy_mcp_store_decisions_total Rate-limit decisions asked of a Redis store
# TYPE caddy_mcp_store_decisions_total counter
caddy_mcp_store_decisions_total{outcome="down",redis="127.0.0.1:6379"} 7
caddy_mcp_store_decisions_total{outcome="error",redis="127.0.0.1:6379"} 2
caddy_mcp_store_decisions_total{outcome="redis",redis="127.0.0.1:6379"} 1.234567e+06
caddy_mcp_store_latency_seconds_count{redis="127.0.0.1:6379"} 1.234569e+06
`
	d := parseStoreDecisions(page)
	assert.Equal(t, uint64(1_234_576), d.all)
	assert.Equal(t, uint64(9), d.fallbacks)
}

// TestBenchRedisCountsCommands runs the benchmark's redis-server, where it
// is installed, and checks the counters it reads.
func TestBenchRedisCountsCommands(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	r, err := startRedis("redis-server", t.TempDir())
	require.NoError(t, err)
	defer r.Stop()
	assert.NotEmpty(t, r.Version)
	before, err := r.counters()
	require.NoError(t, err)
	c, err := dialRESP(r.Addr)
	require.NoError(t, err)
	defer c.close()
	for range 3 {
		_, err := c.do("EVAL", "return redis.call('INCR', KEYS[1])", "1", "k")
		require.NoError(t, err)
	}
	_, err = c.do("SET", "a", "b")
	require.NoError(t, err)
	after, err := r.counters()
	require.NoError(t, err)
	u := useBetween(before, after, 3)
	assert.Equal(t, uint64(7), u.Commands, "3 EVAL, the INCR each runs, 1 SET")
	assert.Equal(t, uint64(3), u.Scripts)
	require.NoError(t, r.Alive())
}

func TestRatiosAreTakenRoundByRound(t *testing.T) {
	all := allConfigs(1000)
	smp := func(requests uint64, p50 time.Duration) *sample {
		s := &sample{Requests: requests, Window: time.Second}
		s.hist.record(p50)
		return s
	}
	// The machine slows down in round 2; the gateway stays at 90 % of the
	// proxy's throughput in each round.
	named := func(name string) config {
		i := slices.IndexFunc(all, func(c config) bool { return c.Name == name })
		require.GreaterOrEqual(t, i, 0, name)
		return all[i]
	}
	proxy := &series{Config: named(cfgProxy), Size: 1024, Samples: []*sample{smp(1000, time.Millisecond), smp(500, 2*time.Millisecond)}}
	mcp := &series{Config: named(cfgMCP), Size: 1024, Samples: []*sample{smp(900, 1100*time.Microsecond), smp(450, 2200*time.Microsecond)}}
	rows := summarise([]*series{proxy, mcp})
	r := findRow(rows, cfgMCP, 1024)
	require.NotNil(t, r)
	assert.InDelta(t, 0.9, r.Ratio.Min, 1e-9)
	assert.InDelta(t, 0.9, r.Ratio.Max, 1e-9)
	assert.InDelta(t, 10, r.AddedP50.Median, 1.6)
	assert.Equal(t, 675.0, r.RPS.Median)

	g := goals(rows, nil, []int{1024})
	require.NotEmpty(t, g)
	assert.Equal(t, "throughput, mcp {} / reverse_proxy, 1 KiB", g[0].What)
	assert.False(t, g[0].Met, "0.90 is under the 0.95 target")
}

func TestResponderEchoesTheID(t *testing.T) {
	for body, id := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"x"}`:          `7`,
		`{"jsonrpc":"2.0", "id" : "a\"b" ,"method":"x"}`: `"a\"b"`,
		`{"jsonrpc":"2.0","method":"notifications/x"}`:   `null`,
		`{"id":-1.5e3}`: `-1.5e3`,
	} {
		assert.Equal(t, id, string(jsonrpcID([]byte(body))), body)
	}
}

// TestClientReadsEachAnswerShape runs the load generator's client against
// the responder, and against canned answers for the shapes the responder
// does not send.
func TestClientReadsEachAnswerShape(t *testing.T) {
	up, err := serveUpstreams()
	require.NoError(t, err)
	defer up.stop()

	c := newClient(&target{addr: up.Responder, path: "/mcp", body: body(1024), keys: 1, expect: upstreamText}, 0, 1)
	defer c.close()
	for range 3 {
		require.NoError(t, c.do(), "keep-alive answers with a Content-Length")
	}

	sse := newClient(&target{addr: up.Responder, path: ssePath, body: body(1024), keys: 1, expect: upstreamText, firstEvent: true}, 0, 1)
	defer sse.close()
	require.NoError(t, sse.do(), "a chunked event stream")
	assert.False(t, sse.eventAt.IsZero())

	canned := serveCanned(t, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+
		"event: message\ndata: {\"id\":1,\"result\":{\"text\":\"canned\"}}\n\n")
	eof := newClient(&target{addr: canned, path: "/mcp", body: body(1024), expect: "canned", firstEvent: true}, 0, 1)
	defer eof.close()
	require.NoError(t, eof.do(), "an answer that ends with the connection")
	assert.False(t, eof.eventAt.IsZero())
	assert.Nil(t, eof.nc, "the connection is closed")

	wrong := newClient(&target{addr: up.Responder, path: "/mcp", body: body(1024), keys: 1, expect: "RATE_LIMITED"}, 0, 1)
	defer wrong.close()
	assert.ErrorIs(t, wrong.do(), errBadAnswer)

	// The peer refuses with an empty 429: good for peer-denied, and for
	// nothing else.
	refusal := "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nRetry-After: 3600\r\n\r\n"
	peer := newClient(&target{addr: serveCanned(t, refusal), path: "/mcp", body: body(1024), status: http.StatusTooManyRequests}, 0, 1)
	defer peer.close()
	require.NoError(t, peer.do(), "the peer's refusal")
	notPeer := newClient(&target{addr: serveCanned(t, refusal), path: "/mcp", body: body(1024), expect: upstreamText}, 0, 1)
	defer notPeer.close()
	assert.ErrorIs(t, notPeer.do(), errBadAnswer, "a 429 where a 200 is expected")
}

// serveCanned answers every connection with reply, then closes it.
func serveCanned(t *testing.T, reply string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
					fmt.Fprint(conn, reply)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestMeasureCountsOnlyTheWindow(t *testing.T) {
	up, err := serveUpstreams()
	require.NoError(t, err)
	defer up.stop()
	var stop atomic.Bool
	// The window is long enough for a request to fit in it on a loaded
	// machine: a request that began before it or ended after it is not
	// counted.
	const window = time.Second
	s := measure(&target{addr: up.Responder, path: "/mcp", body: body(1024), keys: 10, expect: upstreamText}, 2, 50*time.Millisecond, window, &stop)
	assert.Zero(t, s.Errors, s.FirstError)
	assert.Positive(t, s.Requests)
	assert.Equal(t, s.Requests, s.hist.n)
	assert.LessOrEqual(t, s.hist.max, window)
}

// The interval of a median is that of benchstat: order statistics of a
// binomial, widest with few rounds.
func TestMedianIntervalTakesTheOrderStatisticsOfABinomial(t *testing.T) {
	ten := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	iv := medianInterval(ten)
	assert.Equal(t, 5.5, iv.Median)
	assert.Equal(t, 2.0, iv.Low, "the 2nd smallest of 10")
	assert.Equal(t, 9.0, iv.High, "the 2nd largest of 10")
	assert.InDelta(t, 1-2*11.0/1024, iv.Confidence, 1e-9)

	five := medianInterval([]float64{3, 1, 2, 5, 4})
	assert.Equal(t, 3.0, five.Median)
	assert.Equal(t, [2]float64{1, 5}, [2]float64{five.Low, five.High}, "too few rounds for 95 %: the extremes")
	assert.InDelta(t, 1-2.0/32, five.Confidence, 1e-9)

	assert.Nil(t, medianInterval(nil))
}

// CPU over control and against the peer are differences taken round by
// round: a machine twice as slow in round 2 moves neither.
func TestCPUIsComparedRoundByRound(t *testing.T) {
	smp := func(cpu time.Duration) *sample {
		return &sample{Requests: 1000, Answered: 1000, Window: time.Second, CPU: cpu}
	}
	measured := func(name string, cpus ...time.Duration) *series {
		s := &series{Config: config{Name: name, Baseline: cfgProxy}, Size: 1024}
		for _, c := range cpus {
			s.Samples = append(s.Samples, smp(c))
		}
		return s
	}
	// Per answer: control 200 then 400 µs; mcp 15 µs more each round; the
	// peer 5 µs more.
	all := []*series{
		measured(cfgProxy, 190*time.Millisecond, 380*time.Millisecond),
		measured(cfgControl, 200*time.Millisecond, 400*time.Millisecond),
		measured(cfgMCP, 215*time.Millisecond, 415*time.Millisecond),
		measured(cfgPeer, 205*time.Millisecond, 405*time.Millisecond),
	}
	rows := summarise(all)
	mcp := findRow(rows, cfgMCP, 1024)
	require.NotNil(t, mcp.CPUOverControl)
	assert.InDelta(t, 15, mcp.CPUOverControl.Median, 1e-9)
	assert.InDelta(t, 15, mcp.CPUOverControl.Low, 1e-9)
	assert.Nil(t, findRow(rows, cfgControl, 1024).CPUOverControl, "control is not compared with itself")

	pairs := versusPeer(all, []int{1024})
	require.Len(t, pairs, 1, "only mcp against peer was measured")
	assert.InDelta(t, 10, pairs[0].CPU.Median, 1e-9)
	g := peerGoals(pairs)
	require.Len(t, g, 1)
	assert.False(t, g[0].Met, "10 µs more than the peer is not at or under it")
}

// The paced client's end to end is compared with reverse_proxy's round by
// round, and the time to the upstream's first byte is kept apart.
func TestPacedIsComparedWithReverseProxyRoundByRound(t *testing.T) {
	smp := func(first, e2e time.Duration) *pacedSample {
		s := &pacedSample{calls: 1}
		s.firstByte.record(first)
		s.endToEnd.record(e2e)
		return s
	}
	samples := map[pacedKey][]*pacedSample{
		{cfgProxy, 1 << 20}:       {smp(time.Millisecond, 100*time.Millisecond), smp(time.Millisecond, 200*time.Millisecond)},
		{cfgMCPWhole, 1 << 20}:    {smp(100*time.Millisecond, 110*time.Millisecond), smp(200*time.Millisecond, 210*time.Millisecond)},
		{cfgMCPStreamed, 1 << 20}: {smp(time.Millisecond, 100*time.Millisecond), smp(time.Millisecond, 200*time.Millisecond)},
	}
	run := summarisePaced(samples, []int{1 << 20}, 100)
	require.Len(t, run.Rows, 3)
	whole := run.Rows[1]
	require.Equal(t, cfgMCPWhole, whole.Config)
	require.NotNil(t, whole.OverProxy)
	assert.InDelta(t, 10, whole.OverProxy.Median, 0.5, "10 ms over reverse_proxy in both rounds")
	assert.InDelta(t, 10, whole.OverProxy.Max, 0.5)
	assert.Nil(t, run.Rows[0].OverProxy, "reverse_proxy is the reference")
	assert.Nil(t, summarisePaced(nil, []int{1 << 20}, 100), "not measured")
}

// TestListsAreMeasuredOnceAgainstTheSlowServerAlone: a tools/list row is
// measured once whatever the body sizes, and compared with the slow server
// alone, which the selection runs.
func TestListsAreMeasuredOnceAgainstTheSlowServerAlone(t *testing.T) {
	sel, err := selectConfigs(cfgFedList+","+cfgFedCall, allConfigs(1000))
	require.NoError(t, err)
	var running []string
	for _, c := range sel.Running {
		running = append(running, c.Name)
	}
	assert.Equal(t, []string{cfgMCP, cfgFedCall, cfgSlowList, cfgFedList}, running)
	for _, c := range sel.Throughput {
		var sizes []int
		for i, size := range []int{1 << 10, 64 << 10} {
			if n, ok := c.sizeAt(i, size); ok {
				sizes = append(sizes, n)
			}
		}
		if c.List {
			assert.Equal(t, []int{len(listBody)}, sizes, c.Name)
			assert.Equal(t, cfgSlowList, c.Baseline)
		} else {
			assert.Equal(t, []int{1 << 10, 64 << 10}, sizes, c.Name)
		}
	}
}

// TestMergedListHoldsTheSlowToolInTheBytesChecked: the federation lists
// the three servers' tools in their order, each as its server wrote it; the
// slow server's, which every answer of federated-list must hold, ends
// within the bytes the load generator keeps of an answer.
func TestMergedListHoldsTheSlowToolInTheBytesChecked(t *testing.T) {
	merged := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + echoTool + `,` + secondTool + `,` + slowTool + `]}}`
	require.True(t, json.Valid([]byte(merged)))
	assert.LessOrEqual(t, strings.Index(merged, slowTool)+len(slowTool), checkBytes)
	for _, tool := range []string{"", secondTool, slowTool} {
		out := appendToolsList(nil, []byte("7"), tool)
		var list struct {
			ID     int `json:"id"`
			Result struct {
				Tools []map[string]any `json:"tools"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(out, &list), string(out))
		assert.Equal(t, 7, list.ID)
		require.Len(t, list.Result.Tools, 1)
		assert.NotEmpty(t, list.Result.Tools[0]["name"])
	}
}

// A federated configuration's CPU is compared with its baseline's round by
// round, and the list's row is labelled as a tools/list.
func TestFederationIsComparedWithItsBaselineRoundByRound(t *testing.T) {
	configs := map[string]config{}
	for _, c := range allConfigs(1000) {
		configs[c.Name] = c
	}
	measured := func(name string, size int, cpus ...time.Duration) *series {
		s := &series{Config: configs[name], Size: size}
		for _, c := range cpus {
			s.Samples = append(s.Samples, &sample{Requests: 100, Answered: 100, Window: time.Second, CPU: c})
		}
		return s
	}
	// Per answer: the call 3 µs over mcp each round, the list 400 µs over
	// the slow server alone.
	all := []*series{
		measured(cfgMCP, 1024, 20*time.Millisecond, 40*time.Millisecond),
		measured(cfgFedCall, 1024, 20300*time.Microsecond, 40300*time.Microsecond),
		measured(cfgSlowList, len(listBody), 30*time.Millisecond, 60*time.Millisecond),
		measured(cfgFedList, len(listBody), 70*time.Millisecond, 100*time.Millisecond),
	}
	figs := versusBaseline(all, []int{1024})
	require.Len(t, figs, 2)
	assert.Equal(t, fedFigure{Config: cfgFedCall, Baseline: cfgMCP, Body: "1 KiB", CPU: figs[0].CPU}, figs[0])
	assert.InDelta(t, 3, figs[0].CPU.Median, 1e-9)
	assert.Equal(t, "tools/list", figs[1].Body)
	assert.InDelta(t, 400, figs[1].CPU.Median, 1e-9)

	var out strings.Builder
	(&report{Rows: summarise(all), Federation: figs}).writeMarkdown(&out)
	assert.Contains(t, out.String(), "| federated-list (against mcp-slow-list) | tools/list |")
	assert.Contains(t, out.String(), "| mcp-slow-list | tools/list |")
	assert.Contains(t, out.String(), "| federated-call | mcp {} | 1 KiB | +3.0 µs")
}
