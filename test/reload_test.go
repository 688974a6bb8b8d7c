package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/redistest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// countingUpstream is an MCP server (the official Go SDK's, at /mcp) and a
// raw JSON-RPC endpoint (at /raw) that share one count of the tool calls
// they are running, and remember the most they ever ran at once.
type countingUpstream struct {
	url     string
	running gauge
	calls   atomic.Int64

	mu sync.Mutex
	// rawIDs counts the raw calls received by id: a request sent again
	// after it was handled would show up twice.
	rawIDs map[string]int
}

func startCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	u := &countingUpstream{rawIDs: make(map[string]int)}
	server := mcp.NewServer(&mcp.Implementation{Name: "counting", Version: "0"}, nil)
	for _, name := range []string{"work", "limited"} {
		mcp.AddTool(server, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			u.work()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "worked"}}}, nil, nil
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	mux.HandleFunc("/raw", func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &msg)
		u.mu.Lock()
		u.rawIDs[string(msg.ID)]++
		u.mu.Unlock()
		// The call is over before its answer is written: the gateway can
		// see the answer end only after this.
		u.work()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"worked"}]}}`, msg.ID)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	u.url = srv.URL
	return u
}

// duplicates are the raw call ids received more than once.
func (u *countingUpstream) duplicates() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for id, n := range u.rawIDs {
		if n > 1 {
			out = append(out, id)
		}
	}
	return out
}

// work runs one tool call: counted while it runs, for a few milliseconds
// (the tool's work, so that calls overlap).
func (u *countingUpstream) work() {
	u.running.add(1)
	time.Sleep(2 * time.Millisecond)
	u.running.add(-1)
	u.calls.Add(1)
}

// failures collects what went wrong in the traffic goroutines.
type failures struct {
	mu   sync.Mutex
	list []string
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	f.list = append(f.list, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *failures) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.list...)
}

func TestReloadUnderTrafficFailsNoCallAndKeepsBucketsAndGuards(t *testing.T) {
	up := startCountingUpstream(t)
	const maxInFlight = 3
	site := func(reload int) string {
		// Every reload changes something unrelated (upstream_retry_after);
		// the limit and the guard keep their settings.
		return fmt.Sprintf(`mcp {
	rate_limit reload_limited {
		key {http.mcp.tool}
		rate 1/1h
		tools limited
	}
	concurrency reload_guard {
		max %d
		queue 64
		queue_timeout 30s
	}
	upstream_retry_after %ds
}
%s`, maxInFlight, 30+reload%2, mcptest.ProxyTo(up.url))
	}
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Site: site(0),
		// The grace period is how long a reload lets the old server finish
		// the calls it is serving before it may cut them. The harness's
		// default, 1ns, is there to make tests stop at once; a deployment
		// sets a real one, and so does this test, which is about reloads
		// losing nothing. (Measured on Caddy v2.11.9, even 1ns does not cut
		// calls in flight: Go's Server.Shutdown gives up at the deadline
		// without closing active connections, and Caddy does not close
		// them. The test does not rely on that.) A reload does not wait
		// for the old server's calls either way.
		GracePeriod: 10 * time.Second,
	})
	rawEndpoint := g.URL + "/raw"
	var fails failures

	// rawCall makes one tools/call over plain HTTP and returns its outcome.
	rawCall := func(client *http.Client, id, tool string) (string, string) {
		resp, body, err := send(rawEndpoint, wire.ToolCall(id, tool), withClient(client))
		switch {
		case resp == nil:
			return "", "transport error: " + err.Error()
		case err != nil:
			return "", "reading the answer: " + err.Error()
		case resp.StatusCode != http.StatusOK:
			return "", fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		}
		return wire.Outcome(body), resp.Header.Get("Retry-After")
	}

	// Spend the bucket of the tool "limited" before any reload.
	plainTransport := &mcptest.ResendingTransport{}
	plain := &http.Client{Transport: plainTransport}
	spent := time.Now()
	got, _ := rawCall(plain, "limited-0", "limited")
	require.Equal(t, "done", got)
	got, _ = rawCall(plain, "limited-1", "limited")
	require.Equal(t, "RATE_LIMITED", got)

	// The SDK clients connect before the reloads start, and keep their
	// standalone GET stream open through them (on the server that accepted
	// it).
	const sdkClients, rawClients = 4, 4
	transports := []*mcptest.ResendingTransport{plainTransport}
	var sessions []*mcp.ClientSession
	for range sdkClients {
		rt := &mcptest.ResendingTransport{}
		transports = append(transports, rt)
		c := mcp.NewClient(&mcp.Implementation{Name: "reload-test", Version: "0"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
			Endpoint: g.URL + "/mcp", HTTPClient: &http.Client{Transport: rt},
		}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		sessions = append(sessions, cs)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopTraffic := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	t.Cleanup(stopTraffic)
	var limitedCalls, succeeded atomic.Int64
	for i, cs := range sessions {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}})
				switch {
				case err != nil:
					fails.add("sdk client %d, call %d: %v", i, n, err)
				case res.IsError || len(res.Content) != 1:
					b, _ := json.Marshal(res)
					fails.add("sdk client %d, call %d: %s", i, n, b)
				default:
					succeeded.Add(1)
				}
			}
		})
	}
	for i := range rawClients {
		rt := &mcptest.ResendingTransport{}
		transports = append(transports, rt)
		client := &http.Client{Transport: rt}
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if got, detail := rawCall(client, fmt.Sprintf("raw-%d-%d", i, n), "work"); got != "done" {
					fails.add("raw client %d, call %d: %s %s", i, n, got, detail)
				} else {
					succeeded.Add(1)
				}
			}
		})
	}
	// The tool that was limited before the reloads stays limited through
	// them: its bucket is the same one.
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if got, detail := rawCall(plain, fmt.Sprint("limited-during-", n), "limited"); got != "RATE_LIMITED" {
				fails.add("limited call %d: %s %s", n, got, detail)
			}
			limitedCalls.Add(1)
		}
	})

	// Reload twelve times while the calls flow: each time once the upstream
	// has run 10 more calls, and the limited tool was called again, since
	// the last reload.
	const reloads, callsBetween = 12, 10
	require.Eventually(t, func() bool { return up.calls.Load() > 20 }, 10*time.Second, time.Millisecond, "traffic is flowing")
	callsBefore := up.calls.Load()
	for i := 1; i <= reloads; i++ {
		calls, limited := up.calls.Load(), limitedCalls.Load()
		require.Eventually(t, func() bool {
			return up.calls.Load() >= calls+callsBetween && limitedCalls.Load() > limited
		}, 10*time.Second, time.Millisecond, "traffic flows before reload %d", i)
		g.Reload(t, site(i))
	}
	callsAfter := up.calls.Load()
	callsDuring := callsAfter - callsBefore
	require.Eventually(t, func() bool { return up.calls.Load() > callsAfter+20 }, 10*time.Second, time.Millisecond, "traffic flows on the last config")
	stopTraffic()

	var resent int64
	for _, rt := range transports {
		resent += rt.Resent.Load()
	}
	t.Logf("%d reloads; %d calls ran upstream (%d during the reloads), at most %d at once; %d limited calls refused; %d requests resent after the old server closed their connection unanswered",
		reloads, up.calls.Load(), callsDuring, up.running.peak.Load(), limitedCalls.Load(), resent)

	list := fails.get()
	assert.Empty(t, list, "no call may fail because of a reload (%d failed)", len(list))
	assert.Equal(t, succeeded.Load()+1, up.calls.Load(), "every call ran upstream exactly once (and limited-0 before the reloads)")
	assert.Empty(t, up.duplicates(), "no request that was sent again had been handled")
	assert.LessOrEqual(t, up.running.peak.Load(), int64(maxInFlight), "old and new config together never run more than max calls")
	assert.GreaterOrEqual(t, up.running.peak.Load(), int64(2), "the guard was under pressure")

	got, retryAfter := rawCall(plain, "limited-after", "limited")
	assert.Equal(t, "RATE_LIMITED", got)
	// The bucket is the one spent before the reloads: its token comes
	// back an hour after it was taken, rounded up to the second.
	wait, err := strconv.Atoi(retryAfter)
	require.NoError(t, err, "Retry-After %q", retryAfter)
	assert.LessOrEqual(t, wait, 3600, "the bucket is the one spent before the reloads")
	assert.GreaterOrEqual(t, wait, 3600-int(math.Ceil(time.Since(spent).Seconds())), "the bucket is the one spent before the reloads")
}

// Reloads under keep-alive traffic leave nothing of the gateway behind.
// Each reload renames a limit and the guard and moves the Redis store to
// another database, so that every reload makes buckets, guards and a Redis
// client of its own and must let the old ones go, and provisions the
// session keys' keeper anew; the SDK clients keep their standalone GET
// streams open through the reloads (each with its keep-alive writer), and
// the raw clients reuse their connections. Once the clients are gone, the
// gateway holds what the first config held: the same goroutines running
// its code, by the function that started them; and /mcp/status and
// /metrics show the last config's limits and guard only. (Whether every
// old config's Redis connections are closed is not asserted: in one full
// run of 5, those of one config were still open 30 s later, a cause not
// yet found; see redisstore's lazyConn.use.)
//
// Caddy's own goroutines are not counted, and are the same with or without
// the mcp handler in front: reverse_proxy's transport, made anew by every
// config, closes its idle connections to the upstream when the config is
// cleaned up, while the old server still has requests in flight; the first
// of them to ask the transport for a connection after that undoes the
// close (net/http's Transport does, so that it has one to give), and the
// connections they put back stay idle for the transport's keep-alive idle
// timeout (2 minutes by default), two goroutines each.
func TestReloadsUnderTrafficLeaveNothingOfTheGatewayBehind(t *testing.T) {
	up := startCountingUpstream(t)
	redis := redistest.Start(t)
	site := func(reload int) string {
		return fmt.Sprintf(`mcp {
	rate_limit per_client_%d {
		rate 1000000/1s
	}
	rate_limit per_tool {
		key {http.mcp.tool}
		rate 1000000/1s
	}
	concurrency guard_%d {
		max 64
		key {http.mcp.tool}
	}
	sessions {
		ttl 1h
	}
	validate
	tools {
		timeout * 30s
	}
	sse_keepalive 20ms
	store redis {
		address redis://%s/%d
		timeout 5s
	}
}
%s`, reload, reload, redis.Addr(), reload, mcptest.ProxyTo(up.url))
	}
	// A grace period as a deployment has, so that the old servers' shutdown
	// is not logged as an error at every reload: a reload does not wait for
	// it either way.
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Site: site(0), Admin: true, GracePeriod: 10 * time.Second})

	// What the first config runs once a call and a session have come and
	// gone.
	warm := &http.Transport{}
	_, _, err := send(g.URL+"/raw", wire.ToolCall("warm", "work"), withClient(&http.Client{Transport: warm}))
	require.NoError(t, err)
	warm.CloseIdleConnections()
	cs := connectSDK(t, g.URL+"/mcp", &mcptest.ResendingTransport{Base: warm})
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.NoError(t, cs.Close())
	warm.CloseIdleConnections()
	require.Eventually(t, func() bool { return requestGoroutines() == 0 }, 10*time.Second, time.Millisecond, "warm-up requests still in the handler")
	before := gatewayGoroutines()
	require.Contains(t, before, "github.com/caddymcp/caddy-mcp/limits.New.func1", "the limits' sweepers are counted")
	require.Contains(t, before, "github.com/caddymcp/caddy-mcp/session.NewKeeper", "the session keys' keeper is counted")
	require.Contains(t, redisConnections(t, redis), 0, "the store's client is connected to Redis, to database 0")

	const sdkClients, rawClients = 4, 4
	var transports []*http.Transport
	var sessions []*mcp.ClientSession
	for range sdkClients {
		tr := &http.Transport{}
		transports = append(transports, tr)
		sessions = append(sessions, connectSDK(t, g.URL+"/mcp", &mcptest.ResendingTransport{Base: tr}))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopTraffic := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	t.Cleanup(stopTraffic)
	var succeeded atomic.Int64
	for _, cs := range sessions {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}}); err == nil {
					succeeded.Add(1)
				}
			}
		})
	}
	for i := range rawClients {
		tr := &http.Transport{}
		transports = append(transports, tr)
		client := &http.Client{Transport: &mcptest.ResendingTransport{Base: tr}}
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := send(g.URL+"/raw", wire.ToolCall(fmt.Sprintf("raw-%d-%d", i, n), "work"), withClient(client)); err == nil {
					succeeded.Add(1)
				}
			}
		})
	}

	// Reload each time the clients have had 10 more calls answered. Redis
	// has 16 databases: one for each config.
	const reloads, callsBetween = 15, 10
	for i := 1; i <= reloads; i++ {
		calls := succeeded.Load()
		require.Eventually(t, func() bool { return succeeded.Load() >= calls+callsBetween }, 10*time.Second, time.Millisecond, "calls answered before reload %d", i)
		g.Reload(t, site(i))
	}
	calls := succeeded.Load()
	require.Eventually(t, func() bool { return succeeded.Load() >= calls+callsBetween }, 10*time.Second, time.Millisecond, "calls answered on the last config")
	stopTraffic()
	for _, cs := range sessions {
		_ = cs.Close()
	}
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}

	// A stopped config's goroutines end once they see it stopped: wait for
	// the count to come back, and show what is left if it does not. No
	// starter may run more than before: fewer is what an earlier test's
	// leftover that ends meanwhile looks like.
	if !assert.Eventually(t, func() bool { return noMoreThan(gatewayGoroutines(), before) }, 30*time.Second, 10*time.Millisecond,
		"the gateway's goroutines are the first config's again after %d reloads and %d calls", reloads, succeeded.Load()) {
		t.Logf("the gateway's goroutines by the function that started them:\nbefore the reloads: %v\nafter them:         %v", before, gatewayGoroutines())
	}
	// The limits and the guard are the last config's only.
	_, status, err := getStatus(g.AdminURL)
	require.NoError(t, err)
	require.Equal(t, 1, len(status.Handlers), "the old configs' handlers are gone from /mcp/status")
	var limits []string
	for _, l := range status.Handlers[0].Features.RateLimits.Limits {
		limits = append(limits, l.Name)
	}
	assert.ElementsMatch(t, []string{fmt.Sprintf("per_client_%d", reloads), "per_tool"}, limits)
	require.NotNil(t, status.Handlers[0].Features.Concurrency)
	assert.Equal(t, fmt.Sprintf("guard_%d", reloads), status.Handlers[0].Features.Concurrency.Name)
	pools := map[string][]string{}
	for name := range mcpMetrics(t, g.AdminURL) {
		for _, family := range []string{"caddy_mcp_ratelimit_buckets", "caddy_mcp_inflight"} {
			if strings.HasPrefix(name, family+"{") {
				pools[family] = append(pools[family], name)
			}
		}
	}
	assert.ElementsMatch(t, []string{
		fmt.Sprintf(`caddy_mcp_ratelimit_buckets{limit="per_client_%d"}`, reloads),
		`caddy_mcp_ratelimit_buckets{limit="per_tool"}`,
	}, pools["caddy_mcp_ratelimit_buckets"], "the old configs' buckets are let go")
	assert.Equal(t, []string{fmt.Sprintf(`caddy_mcp_inflight{guard="guard_%d"}`, reloads)}, pools["caddy_mcp_inflight"], "the old configs' guards are let go")
}

// connectSDK opens an SDK client session through rt.
func connectSDK(t *testing.T, endpoint string, rt *mcptest.ResendingTransport) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "reload-test", Version: "0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// gatewayGoroutines counts the goroutines running the gateway's code (a
// frame of one of its packages, the tests' aside), by the function that
// started each. The Redis client's own goroutines are left out: they come
// and go with its traffic; its connections are counted instead
// (redisConnections).
func gatewayGoroutines() map[string]int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	const module = "github.com/caddymcp/caddy-mcp/"
	counts := make(map[string]int)
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, module) || strings.Contains(g, module+"test") {
			continue
		}
		creator := "(no creator)"
		if _, after, ok := strings.Cut(g, "\ncreated by "); ok {
			creator, _, _ = strings.Cut(after, "\n")
			creator, _, _ = strings.Cut(creator, " in goroutine ")
		}
		counts[creator]++
	}
	return counts
}

// noMoreThan reports whether no key of counts counts more than in limit.
func noMoreThan(counts, limit map[string]int) bool {
	for k, n := range counts {
		if n > limit[k] {
			return false
		}
	}
	return true
}

// redisConnections counts the connections to srv by the database they
// selected, redis-cli's own aside.
func redisConnections(t *testing.T, srv *redistest.Server) map[int]int {
	t.Helper()
	counts := make(map[int]int)
	for line := range strings.SplitSeq(srv.CLI(t, "CLIENT", "LIST"), "\n") {
		var db int
		var cmd string
		for field := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(field, "db="); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err, line)
				db = n
			}
			if v, ok := strings.CutPrefix(field, "cmd="); ok {
				cmd = v
			}
		}
		if cmd != "client|list" {
			counts[db]++
		}
	}
	return counts
}
