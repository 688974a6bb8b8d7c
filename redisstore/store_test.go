package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/ratelimit"
	"github.com/caddymcp/caddy-mcp/redisstore"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/redistest"
)

func TestMain(m *testing.M) { mcptest.Main(m) }

// provision provisions r as Caddy would, and cleans it up when the test
// ends.
func provision(t *testing.T, r *redisstore.Redis) *redisstore.Redis {
	t.Helper()
	provisionIn(t, r)
	return r
}

// provisionIn provisions r, and returns the registry its metrics are in.
func provisionIn(t testing.TB, r *redisstore.Redis) *prometheus.Registry {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	require.NoError(t, r.Provision(ctx))
	t.Cleanup(func() { _ = r.Cleanup() })
	return ctx.GetMetricsRegistry()
}

// roundTrips is the number of exchanges with Redis the store made: the
// observations of its latency histogram.
func roundTrips(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var n uint64
	for _, f := range families {
		if f.GetName() == "caddy_mcp_store_latency_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// redisDecides is the timeout of the tests whose decisions must all be
// made by Redis. They are about what Redis decides, not how long it may
// take: a store's first decision connects and loads the bucket script,
// several round trips that take more than the default 50 ms on a loaded
// machine with the race detector, and a decision that misses its timeout
// is made by the node instead.
const redisDecides = caddy.Duration(10 * time.Second)

// storeFor is a store module for srv whose decisions wait for Redis.
func storeFor(srv *redistest.Server) *redisstore.Redis {
	return &redisstore.Redis{Addresses: []string{srv.URL()}, Timeout: redisDecides}
}

// decisions is how many decisions the store on addr counted by where they
// were made (caddy_mcp_store_decisions_total): "redis", "error" (Redis
// failed or timed out) and "down" (Redis known down, not asked).
func decisions(t *testing.T, reg *prometheus.Registry, addr string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := make(map[string]float64)
	for _, f := range families {
		if f.GetName() != "caddy_mcp_store_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := make(map[string]string)
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["redis"] == addr {
				out[labels["outcome"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// since is how many decisions each outcome counted from before to now.
func since(before, now map[string]float64) map[string]float64 {
	out := make(map[string]float64)
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func limitOf(t *testing.T, rate string, burst int) ratelimit.Limit {
	t.Helper()
	r, err := ratelimit.ParseRate(rate)
	require.NoError(t, err)
	return ratelimit.Limit{Rate: r, Burst: burst}
}

// The Redis store decides as the in-process store does, step for step: the
// same allowed and denied events, the same retry_after (to the time the two
// decisions were made apart), the same refunds.
func TestRedisDecidesAsMemoryDoes(t *testing.T) {
	srv := redistest.Start(t)
	r := provision(t, storeFor(srv))
	tests := []struct {
		name  string
		limit ratelimit.Limit
		// steps: "take N" or "refund N"
		steps []string
	}{
		{"a burst, then refused", limitOf(t, "3/1h", 3), []string{"take 1", "take 1", "take 1", "take 1", "take 2"}},
		{"a batch takes its cost at once", limitOf(t, "10/1m", 10), []string{"take 4", "take 4", "take 4", "take 2", "take 1"}},
		{"a cost over the burst can never pass", limitOf(t, "5/1m", 5), []string{"take 6", "take 5", "take 1"}},
		{"refunds give tokens back, up to the burst", limitOf(t, "2/1h", 2), []string{"take 2", "take 1", "refund 1", "take 1", "take 1", "refund 5", "take 2", "take 1"}},
		{"a burst apart from the rate", limitOf(t, "1/1m", 4), []string{"take 3", "take 1", "take 1"}},
		// A wait of centuries is capped as in process, never a negative
		// Duration.
		{"a rate of one event in centuries", limitOf(t, "1/106000d", 1), []string{"take 1", "take 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := ratelimit.NewMemory(0)
			store := r.Store("parity "+tt.name, ratelimit.NewMemory(0))
			start := time.Now()
			for i, step := range tt.steps {
				op, n, _ := strings.Cut(step, " ")
				cost, err := strconv.Atoi(n)
				require.NoError(t, err)
				if op == "refund" {
					mem.Refund(start, "client", cost, tt.limit)
					store.Refund(time.Now(), "client", cost, tt.limit)
					continue
				}
				want := mem.Take(start, "client", cost, tt.limit)
				got := store.Take(time.Now(), "client", cost, tt.limit)
				elapsed := time.Since(start)
				assert.Equal(t, want.Allowed, got.Allowed, "step %d (%s)", i, step)
				assert.Equal(t, want.Remaining, got.Remaining, "step %d (%s)", i, step)
				assert.False(t, got.Unchecked)
				// Redis decided up to elapsed later, on its own clock, and
				// counts in microseconds.
				assert.InDelta(t, want.RetryAfter, got.RetryAfter, float64(elapsed+time.Microsecond), "step %d (%s)", i, step)
			}
		})
	}
}

// A bucket is one Redis key that expires when it would be full again; a
// bucket back to full is deleted at once. What a key costs Redis is
// measured here (MEMORY USAGE), for docs/operating.md.
func TestBucketsExpireWhenFullAgain(t *testing.T) {
	srv := redistest.Start(t)
	r := storeFor(srv)
	r.KeyPrefix = "t:"
	provision(t, r)
	store := r.Store("per_client", ratelimit.NewMemory(0))
	lim := limitOf(t, "10/1m", 10)

	taken := time.Now()
	require.True(t, store.Take(time.Now(), "10.0.0.1", 4, lim).Allowed)
	key := "t:{per_client:" + digest("10.0.0.1") + "}"
	pttl, err := strconv.Atoi(srv.CLI(t, "PTTL", key))
	require.NoError(t, err)
	// 4 tokens refill in 24 s, counted from when Redis decided, which was
	// at most this long before it answered PTTL.
	elapsed := time.Since(taken).Milliseconds()
	assert.LessOrEqual(t, pttl, 24_000, "the key lives until the bucket is full again")
	assert.GreaterOrEqual(t, int64(pttl), 24_000-elapsed-1, "the key lives until the bucket is full again")
	usage, err := strconv.Atoi(srv.CLI(t, "MEMORY", "USAGE", key))
	require.NoError(t, err)
	t.Logf("one bucket (key %q): %d bytes (MEMORY USAGE)", key, usage)
	assert.Less(t, usage, 200)

	store.Refund(time.Now(), "10.0.0.1", 4, lim)
	assert.Equal(t, "0", srv.CLI(t, "EXISTS", key), "a bucket refunded to full is no bucket")

	assert.False(t, store.Take(time.Now(), "10.0.0.2", 11, lim).Allowed)
	assert.Equal(t, "0", srv.CLI(t, "EXISTS", "t:{per_client:"+digest("10.0.0.2")+"}"), "a refused take writes nothing")
}

// The status writes its timeout as /mcp/status writes every duration.
func TestStatusWritesTheTimeoutAsADuration(t *testing.T) {
	srv := redistest.Start(t)
	r := storeFor(srv)
	r.Timeout = caddy.Duration(20 * time.Millisecond)
	provision(t, r)
	raw, err := json.Marshal(r.Status())
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"timeout":"20ms"`)
}

// When Redis dies, decisions go elsewhere as on_error says: the first
// few ask Redis and fail, then none asks it until a probe finds it back;
// then they go to Redis again.
func TestOnErrorWhileRedisIsDown(t *testing.T) {
	lim := limitOf(t, "2/1h", 2)
	for _, mode := range []redisstore.OnError{redisstore.Local, redisstore.Allow, redisstore.Deny} {
		t.Run(string(mode), func(t *testing.T) {
			srv := redistest.Start(t)
			r := storeFor(srv)
			r.OnError = mode
			reg := provisionIn(t, r)
			local := ratelimit.NewMemory(0)
			store := r.Store("per_client", local)
			require.True(t, store.Take(time.Now(), "c", 2, lim).Allowed, "Redis decides")
			require.False(t, store.Take(time.Now(), "c", 1, lim).Allowed, "Redis holds the bucket empty")

			srv.Kill()
			before := decisions(t, reg, srv.Addr())
			var decided []ratelimit.Decision
			for range 4 {
				decided = append(decided, store.Take(time.Now(), "c", 1, lim))
			}
			// Three exchanges in a row failed: Redis is down, and the
			// fourth decision does not ask it.
			assert.Equal(t, map[string]float64{"error": 3, "down": 1}, since(before, decisions(t, reg, srv.Addr())))
			switch mode {
			case redisstore.Local:
				// The node's own bucket starts full: 2 tokens, then refused.
				assert.Equal(t, []bool{true, true, false, false}, allowedOf(decided))
				assert.Positive(t, local.Len())
			case redisstore.Allow:
				assert.Equal(t, []bool{true, true, true, true}, allowedOf(decided))
			case redisstore.Deny:
				assert.Equal(t, []bool{false, false, false, false}, allowedOf(decided))
				for _, d := range decided {
					assert.True(t, d.Unchecked)
					assert.Equal(t, redisstore.DenyRetryAfter, d.RetryAfter)
				}
			}
			status := r.Status().(redisstore.Status)
			assert.False(t, status.Healthy)
			assert.NotEmpty(t, status.LastError)

			srv.Restart()
			require.Eventually(t, func() bool {
				return r.Status().(redisstore.Status).Healthy
			}, 10*time.Second, 20*time.Millisecond, "a probe finds Redis back")
			// The restarted Redis lost its buckets (no persistence): a new
			// one starts full.
			d := store.Take(time.Now(), "c", 2, lim)
			assert.True(t, d.Allowed, "%+v %+v", d, r.Status())
			assert.False(t, d.Unchecked)
			assert.False(t, store.Take(time.Now(), "c", 1, lim).Allowed, "Redis decides again")
		})
	}
}

func allowedOf(ds []ratelimit.Decision) []bool {
	out := make([]bool, len(ds))
	for i, d := range ds {
		out[i] = d.Allowed
	}
	return out
}

// A stalled Redis (a network stall, a long command) costs each decision
// its timeout at most, then none while it stays stalled.
func TestAStalledRedisCostsOneTimeout(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 50 * time.Millisecond
	r := &redisstore.Redis{Addresses: []string{srv.URL()}, Timeout: caddy.Duration(timeout)}
	reg := provisionIn(t, r)
	store := r.Store("per_client", ratelimit.NewMemory(0))
	lim := limitOf(t, "100/1s", 100)
	// Once one decision is made in Redis, the store has connected and
	// loaded its script, and no failure is counted against Redis, however
	// long the first attempts took on a loaded machine.
	require.Eventually(t, func() bool {
		store.Take(time.Now(), "c", 1, lim)
		return decisions(t, reg, srv.Addr())["redis"] > 0
	}, 10*time.Second, time.Millisecond, "a decision made in Redis")

	srv.Stall()
	defer srv.Resume()
	// A pause shorter than a few timeouts is not an outage: the breaker
	// opens after the third decision in a row that failed. Each waits for
	// Redis no longer than its timeout: the stall lasts until Resume, so a
	// decision that waited for Redis would still be waiting. The bound
	// leaves room for a loaded machine to wake the request late.
	before := decisions(t, reg, srv.Addr())
	for range 3 {
		start := time.Now()
		assert.True(t, store.Take(time.Now(), "c", 1, lim).Allowed, "decided locally")
		assert.Less(t, time.Since(start), timeout+time.Second)
	}
	assert.Equal(t, map[string]float64{"error": 3}, since(before, decisions(t, reg, srv.Addr())), "three decisions asked Redis")
	before = decisions(t, reg, srv.Addr())
	for range 10 {
		store.Take(time.Now(), "c", 1, lim)
	}
	assert.Equal(t, map[string]float64{"down": 10}, since(before, decisions(t, reg, srv.Addr())), "no decision asks a Redis known down")
	srv.Resume()
	require.Eventually(t, func() bool { return r.Status().(redisstore.Status).Healthy }, 10*time.Second, 20*time.Millisecond)
}

// Stores with the same connection settings share one client, across
// handlers and reloads: a second provision neither dials again nor resets
// the breaker.
func TestSameSettingsShareOneClient(t *testing.T) {
	srv := redistest.Start(t)
	a := provision(t, &redisstore.Redis{Addresses: []string{srv.URL()}})
	srv.Kill()
	for range 3 {
		a.Store("l", ratelimit.NewMemory(0)).Take(time.Now(), "k", 1, limitOf(t, "1/1s", 1))
	}
	require.False(t, a.Status().(redisstore.Status).Healthy)
	b := provision(t, &redisstore.Redis{Addresses: []string{srv.URL()}, KeyPrefix: "other:"})
	assert.False(t, b.Status().(redisstore.Status).Healthy, "b uses a's client, which knows Redis is down")
}

func TestSettingsAreChecked(t *testing.T) {
	for _, tt := range []struct {
		r    redisstore.Redis
		want string
	}{
		{redisstore.Redis{}, "address: at least one is needed"},
		{redisstore.Redis{Addresses: []string{"localhost:6379"}, KeyPrefix: "{app}:"}, "must not hold { or }"},
		{redisstore.Redis{Addresses: []string{"localhost:6379"}, OnError: "retry"}, `on_error "retry": want local, allow or deny`},
	} {
		assert.ErrorContains(t, tt.r.Validate(), tt.want)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for addr, want := range map[string]string{
		"localhost":                          "want host:port",
		"redis://:secret@localhost:6379/x":   "address 1 of 1: not a valid redis:// URL",
		"user:secret@localhost:6379":         "address 1 of 1: want host:port",
		"redis://:s3cr%et@localhost:6379/0":  "not a valid redis:// URL",
		"http://localhost:6379":              "invalid URL scheme",
		"redis://a:1/1 redis://b:1/1":        "", // checked below with two addresses
		"redis://localhost:6379/0?foo=bar=1": "",
	} {
		if want == "" {
			continue
		}
		r := &redisstore.Redis{Addresses: []string{addr}}
		err := r.Provision(ctx)
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), want, addr)
		assert.NotContains(t, err.Error(), "secret", "no password in an error")
	}
	r := &redisstore.Redis{Addresses: []string{"redis://a:1/1", "redis://b:1/1"}}
	assert.ErrorContains(t, r.Provision(ctx), "a Redis Cluster has database 0 only")
}

// A credential or address taken from the environment that comes out empty
// refuses the config, naming the option, its placeholder and the variable:
// an unset password would connect without it, and every decision would
// fail as on_error says, in silence. Values are never named.
func TestSettingsFromAnUnsetVariableAreRefusedByName(t *testing.T) {
	t.Setenv("CADDY_MCP_TEST_REDIS_EMPTY", "")
	t.Setenv("CADDY_MCP_TEST_REDIS_SECRET", "s3cret")
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for _, tt := range []struct {
		name string
		r    redisstore.Redis
		want string
	}{
		{"an unset password", redisstore.Redis{Addresses: []string{"localhost:6379"}, Password: "{env.CADDY_MCP_TEST_REDIS_UNSET}"},
			"password {env.CADDY_MCP_TEST_REDIS_UNSET} is empty: environment variable CADDY_MCP_TEST_REDIS_UNSET is not set"},
		{"an empty username", redisstore.Redis{Addresses: []string{"localhost:6379"}, Username: "{env.CADDY_MCP_TEST_REDIS_EMPTY}", Password: "{env.CADDY_MCP_TEST_REDIS_SECRET}"},
			"username {env.CADDY_MCP_TEST_REDIS_EMPTY} is empty: environment variable CADDY_MCP_TEST_REDIS_EMPTY is empty"},
		{"an unset address", redisstore.Redis{Addresses: []string{"{env.CADDY_MCP_TEST_REDIS_UNSET}"}},
			"address {env.CADDY_MCP_TEST_REDIS_UNSET} is empty: environment variable CADDY_MCP_TEST_REDIS_UNSET is not set"},
		{"placeholders that are all empty", redisstore.Redis{Addresses: []string{"localhost:6379"}, Password: "{env.CADDY_MCP_TEST_REDIS_EMPTY}{env.CADDY_MCP_TEST_REDIS_UNSET}"},
			"environment variable CADDY_MCP_TEST_REDIS_EMPTY is empty, environment variable CADDY_MCP_TEST_REDIS_UNSET is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Provision(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
	// A variable that is set is used, and no address or credential
	// written as such is refused for being a literal.
	r := provision(t, &redisstore.Redis{Addresses: []string{"localhost:6379"}, Password: "{env.CADDY_MCP_TEST_REDIS_SECRET}"})
	assert.NotNil(t, r)
}

// scriptCalls is how many times Redis ran a script: one round trip each
// for a single limit, one per pipeline slot for several.
func scriptCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	n := 0
	for line := range strings.SplitSeq(srv.CLI(t, "INFO", "commandstats"), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		c, err := strconv.Atoi(calls)
		require.NoError(t, err)
		n += c
	}
	return n
}

// A request meeting two limits on one Redis has both decided by one script
// in one round trip, all or nothing: when one denies, the script writes
// no bucket, so the other's tokens were never taken.
func TestSeveralLimitsAreDecidedTogether(t *testing.T) {
	srv := redistest.Start(t)
	r := storeFor(srv)
	reg := provisionIn(t, r)
	perClient := r.Store("per_client", ratelimit.NewMemory(0))
	global := r.Store("global", ratelimit.NewMemory(0))
	wide, narrow := limitOf(t, "100/1h", 100), limitOf(t, "2/1h", 2)
	reqs := func() []ratelimit.Request {
		return []ratelimit.Request{
			{Store: perClient, Key: "c", Cost: 1, Limit: wide},
			{Store: global, Key: "", Cost: 1, Limit: narrow},
		}
	}
	// The first decision loads the script into Redis.
	denied, _ := ratelimit.TakeAll(time.Now(), reqs())
	require.Equal(t, -1, denied)
	before, trips := scriptCalls(t, srv), roundTrips(t, reg)
	denied, _ = ratelimit.TakeAll(time.Now(), reqs())
	assert.Equal(t, -1, denied)
	assert.Equal(t, 1, scriptCalls(t, srv)-before, "one request, two limits: one script")
	assert.Equal(t, uint64(1), roundTrips(t, reg)-trips, "in one round trip")

	before, trips = scriptCalls(t, srv), roundTrips(t, reg)
	denied, d := ratelimit.TakeAll(time.Now(), reqs())
	assert.Equal(t, 1, denied, "the global limit is spent")
	assert.Equal(t, uint64(1), roundTrips(t, reg)-trips, "refused in one round trip: nothing to give back")
	assert.Equal(t, 1, scriptCalls(t, srv)-before)
	assert.Positive(t, d.RetryAfter)
	// The per-client limit kept the tokens of the two admitted requests
	// only.
	left := perClient.Take(time.Now(), "c", 98, wide)
	assert.True(t, left.Allowed, "98 of 100 tokens are left: the refused request took none")
	assert.Equal(t, 0, left.Remaining)

	// Redis restarted loses its scripts: the pipeline loads it again.
	srv.Kill()
	srv.Restart()
	// The first decisions after the restart may meet the broken connection
	// and be made by the node; then Redis decides again.
	require.Eventually(t, func() bool {
		denied, _ := ratelimit.TakeAll(time.Now(), reqs())
		return denied == -1 && srv.CLI(t, "EXISTS", bucketKey("global", "")) == "1"
	}, 10*time.Second, 20*time.Millisecond, "decided in the restarted Redis")
}

// On a Redis Cluster a request's buckets sit on several masters (a hash
// tag each), so each is decided by a script of its own, all in one round
// trip; when one denies, the others' tokens go back in a second.
func TestSeveralLimitsOnAClusterAreAllOrNothing(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	r := &redisstore.Redis{Addresses: cluster.URLs(), Timeout: redisDecides}
	reg := provisionIn(t, r)
	perClient := r.Store("per_client", ratelimit.NewMemory(0))
	perTool := r.Store("per_tool", ratelimit.NewMemory(0))
	wide, narrow := limitOf(t, "100/1h", 100), limitOf(t, "2/1h", 2)
	reqs := []ratelimit.Request{
		{Store: perClient, Key: "127.0.0.1", Cost: 1, Limit: wide},
		{Store: perTool, Key: "echo", Cost: 1, Limit: narrow},
	}
	require.Eventually(t, func() bool {
		denied, d := ratelimit.TakeAll(time.Now(), reqs)
		return denied == -1 && !d.Unchecked && cluster.CLI(t, "EXISTS", bucketKey("per_tool", "echo")) == "1"
	}, 10*time.Second, 20*time.Millisecond, "the cluster client finds every master")
	trips := roundTrips(t, reg)
	denied, _ := ratelimit.TakeAll(time.Now(), reqs)
	require.Equal(t, -1, denied)
	assert.Equal(t, uint64(1), roundTrips(t, reg)-trips, "two masters, one round trip")

	trips = roundTrips(t, reg)
	denied, d := ratelimit.TakeAll(time.Now(), reqs)
	assert.Equal(t, 1, denied, "per_tool is spent")
	assert.Positive(t, d.RetryAfter)
	assert.Equal(t, uint64(2), roundTrips(t, reg)-trips, "one round trip to decide, one to give back")
	left := perClient.Take(time.Now(), "127.0.0.1", 98, wide)
	assert.True(t, left.Allowed, "98 of 100 tokens are left: the refused request's came back")
	assert.Equal(t, 0, left.Remaining)
}

// A request meeting more buckets than one run of the script decides (a
// wide batch on a per-tool limit) is decided in runs of 64, in one round
// trip; when a later run refuses, the runs that took give their tokens back.
func TestManyBucketsAreDecidedInRuns(t *testing.T) {
	srv := redistest.Start(t)
	r := storeFor(srv)
	reg := provisionIn(t, r)
	perTool := r.Store("per_tool", ratelimit.NewMemory(0))
	lim := limitOf(t, "2/1h", 2)
	reqs := func(last int) []ratelimit.Request {
		out := make([]ratelimit.Request, 100)
		for i := range out {
			out[i] = ratelimit.Request{Store: perTool, Key: fmt.Sprintf("tool-%d", i), Cost: 1, Limit: lim}
		}
		out[99].Cost = last
		return out
	}
	require.True(t, perTool.Take(time.Now(), "warm", 1, lim).Allowed, "the script is loaded")
	before, trips := scriptCalls(t, srv), roundTrips(t, reg)
	denied, _ := ratelimit.TakeAll(time.Now(), reqs(1))
	require.Equal(t, -1, denied)
	assert.Equal(t, 2, scriptCalls(t, srv)-before, "100 buckets: two runs")
	assert.Equal(t, uint64(1), roundTrips(t, reg)-trips, "in one round trip")

	denied, _ = ratelimit.TakeAll(time.Now(), reqs(2))
	assert.Equal(t, 99, denied, "the last bucket lacks a second token")
	for i := range 99 {
		d := perTool.Take(time.Now(), fmt.Sprintf("tool-%d", i), 1, lim)
		require.True(t, d.Allowed, "tool-%d: the refused request's token came back", i)
		require.Equal(t, 0, d.Remaining, "tool-%d: and no more than it", i)
	}
}

// A bucket named twice in one decision (two handlers' limits of one name)
// is one bucket, decided in order: the second take sees what the first
// left.
func TestABucketNamedTwiceIsOneBucket(t *testing.T) {
	srv := redistest.Start(t)
	r := provision(t, storeFor(srv))
	lim := limitOf(t, "3/1h", 3)
	one, other := r.Store("shared", ratelimit.NewMemory(0)), r.Store("shared", ratelimit.NewMemory(0))
	reqs := func(cost int) []ratelimit.Request {
		return []ratelimit.Request{{Store: one, Key: "c", Cost: cost, Limit: lim}, {Store: other, Key: "c", Cost: cost, Limit: lim}}
	}
	denied, d := ratelimit.TakeAll(time.Now(), reqs(2))
	assert.Equal(t, 1, denied, "2 + 2 tokens of a bucket of 3")
	assert.Equal(t, 1, d.Remaining)
	assert.Equal(t, "0", srv.CLI(t, "EXISTS", bucketKey("shared", "c")), "refused: nothing written")
	denied, d = ratelimit.TakeAll(time.Now(), reqs(1))
	assert.Equal(t, -1, denied)
	assert.Equal(t, 1, d.Remaining, "1 + 1 of 3")
	assert.False(t, one.Take(time.Now(), "c", 2, lim).Allowed)
	assert.True(t, one.Take(time.Now(), "c", 1, lim).Allowed)
}

// Limit names are escaped in bucket keys: limit a with key b:c and limit
// a:b with key c are two buckets, not one.
func TestLimitNamesAreEscapedInBucketKeys(t *testing.T) {
	srv := redistest.Start(t)
	r := provision(t, storeFor(srv))
	lim := limitOf(t, "1/1h", 1)
	a, ab := r.Store("a", ratelimit.NewMemory(0)), r.Store("a:b", ratelimit.NewMemory(0))
	require.True(t, a.Take(time.Now(), "b:c", 1, lim).Allowed)
	assert.True(t, ab.Take(time.Now(), "c", 1, lim).Allowed, "a bucket of its own")
	assert.Equal(t, "1", srv.CLI(t, "EXISTS", bucketKey("a%3Ab", "c")))
}

// A key under the prefix that is not a bucket (written by something else)
// neither fails decisions nor trips the breaker: it is replaced.
func TestAKeyThatIsNotABucketIsReplaced(t *testing.T) {
	srv := redistest.Start(t)
	r := provision(t, storeFor(srv))
	store := r.Store("per_client", ratelimit.NewMemory(0))
	lim := limitOf(t, "2/1h", 2)
	srv.CLI(t, "HSET", bucketKey("per_client", "c"), "t", "0")
	srv.CLI(t, "SET", bucketKey("per_client", "d"), "garbage")
	for _, key := range []string{"c", "d"} {
		assert.True(t, store.Take(time.Now(), key, 2, lim).Allowed, key)
		assert.False(t, store.Take(time.Now(), key, 1, lim).Allowed, key)
	}
	assert.True(t, r.Status().(redisstore.Status).Healthy)
}

// An error reply about one decision (Redis out of memory, a key it will
// not write) is that decision's failure: it is made as on_error says, and
// Redis is not taken as down for everyone. Found by an attacker's review.
func TestAnErrorReplyFailsOneDecisionNotTheStore(t *testing.T) {
	srv := redistest.Start(t)
	r := provision(t, storeFor(srv))
	local := ratelimit.NewMemory(0)
	store := r.Store("per_client", local)
	lim := limitOf(t, "5/1h", 5)
	require.True(t, store.Take(time.Now(), "a", 1, lim).Allowed)

	srv.CLI(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	srv.CLI(t, "CONFIG", "SET", "maxmemory", "1")
	for range 5 {
		assert.True(t, store.Take(time.Now(), "b", 1, lim).Allowed, "decided by the node: Redis cannot write")
	}
	assert.Positive(t, local.Len())
	assert.True(t, r.Status().(redisstore.Status).Healthy, "Redis answers: it is not down")

	srv.CLI(t, "CONFIG", "SET", "maxmemory", "0")
	d := store.Take(time.Now(), "a", 4, lim)
	assert.True(t, d.Allowed)
	assert.Equal(t, 0, d.Remaining, "Redis decides again, with a's bucket as it was")
}

// Redis holds no key as the client sent it, whatever the key template
// (tokens and addresses are secrets to whoever reads Redis: a replica, a
// backup, MONITOR): every bucket's key is a digest of the key, and the
// decisions share buckets as the keys do. A brace in a key cannot end the
// hash tag early either. Found by an attacker's review: keys of 128 bytes
// or less were stored as sent.
func TestRedisHoldsNoKeyAsTheClientSentIt(t *testing.T) {
	srv := redistest.Start(t)
	r := provision(t, storeFor(srv))
	store := r.Store("per_client", ratelimit.NewMemory(0))
	lim := limitOf(t, "1/1h", 1)
	keys := []struct{ name, key string }{
		{"an authorization header", "bearer fleet1-4f6e1c2a9b"},
		{"another token", "bearer fleet2-7d3b8e0f5a"},
		{"a short plain value", "alice"},
		{"an address", "10.0.0.1"},
		{"braces", "}x{y%"},
		{"the longest key kept as it is", strings.Repeat("long-key/", 15)[:128]},
	}
	for _, k := range keys {
		assert.True(t, store.Take(time.Now(), k.key, 1, lim).Allowed, "%s: a bucket of its own", k.name)
	}
	for _, k := range keys {
		assert.False(t, store.Take(time.Now(), k.key, 1, lim).Allowed, "%s: the same bucket again", k.name)
	}

	held := strings.Split(srv.CLI(t, "--scan"), "\n")
	want := make([]string, 0, len(keys))
	for _, k := range keys {
		want = append(want, bucketKey("per_client", k.key))
		for _, h := range held {
			assert.NotContains(t, h, k.key, "%s: held as sent", k.name)
		}
	}
	assert.ElementsMatch(t, want, held, "one bucket a key, under its digest")
}

// bucketKey is the Redis key of a limit's bucket for a key: the default
// prefix, then, as a hash tag, the limit's name and the key's digest.
func bucketKey(limit, key string) string { return "caddy-mcp:{" + limit + ":" + digest(key) + "}" }

// digest is what a bucket's Redis key holds of its key: the first 128
// bits of its SHA-256, in hex.
func digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}
