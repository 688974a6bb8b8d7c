package fleet

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/redistest"
)

// clientIDs are the ids of the connections Redis has from clients, this
// redis-cli's own left out.
func clientIDs(t *testing.T, srv *redistest.Server) map[string]bool {
	t.Helper()
	ids := make(map[string]bool)
	for line := range strings.SplitSeq(srv.CLI(t, "CLIENT", "LIST"), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || slices.Contains(fields, "cmd=client|list") {
			continue
		}
		id, ok := strings.CutPrefix(fields[0], "id=")
		require.True(t, ok, "CLIENT LIST line %q", line)
		ids[id] = true
	}
	return ids
}

// A reload that leaves the store's settings alone keeps its client, with
// its connections, and the buckets are in Redis: a client that spent its
// burst before an operator changed an unrelated option is still refused
// after it, and the node keeps its connections to Redis.
func TestReloadKeepsConnectionsAndBuckets(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := startUpstream(t)
	shared := []string{redisStore(sharedTimeout, "local", srv.URL()), rateLimit("per_client", "3/1m")}
	a := fleettest.StartNode(t, site(up, append(shared, "max_request_body 4MiB")...))

	spent := alternate(t, 4, a)
	require.Equal(t, append(repeat("done", 3), rateLimited), outcomes(spent))
	before := clientIDs(t, srv)
	require.NotEmpty(t, before, "the node's connections to Redis")

	a.Reload(t, site(up, append(shared, "max_request_body 1MiB")...))
	after := callAfterReload(t, a)
	require.Equal(t, rateLimited, after.outcome, "the bucket spent before the reload")
	// The same bucket: its wait went down by the time that passed between
	// the two decisions, give or take the rounding up to the second.
	between := after.at.Sub(spent[3].at.Add(-spent[3].latency)).Seconds()
	assert.LessOrEqual(t, spent[3].env.RetryAfter-after.env.RetryAfter, math.Ceil(between)+1,
		"retry_after %v before the reload, %v after, %.1f seconds apart", spent[3].env.RetryAfter, after.env.RetryAfter, between)
	assert.GreaterOrEqual(t, spent[3].env.RetryAfter, after.env.RetryAfter)
	// The connections open before the reload are still open, and serve:
	// the client may open more (it spreads its requests over a few), but
	// it was not replaced, which would have closed them.
	afterReload := clientIDs(t, srv)
	for id := range before {
		assert.True(t, afterReload[id], "connection %s, open before the reload, is gone after it: %v", id, afterReload)
	}
	t.Logf("the node's connections to Redis: %d before the reload, %d after", len(before), len(afterReload))
	assert.True(t, requireStatus(t, a).Healthy)

	// Every decision was Redis's, before the reload and after, and the
	// counter kept counting across it.
	decided := metric(t, a, "caddy_mcp_store_decisions_total", `outcome="redis"`, fmt.Sprintf("redis=%q", srv.Addr()))
	assert.Equal(t, 5.0, decided, "caddy_mcp_store_decisions_total{outcome=\"redis\"}")
	assert.Equal(t, 0.0, metric(t, a, "caddy_mcp_store_decisions_total", `outcome="error"`), "decisions Redis failed")
	assert.EqualValues(t, 3, up.calls.Load(), "calls that reached the upstream")

	// The node runs the new config.
	resp, err := client.Get(a.Admin() + "/config/")
	require.NoError(t, err)
	config, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(config), `"max_request_body":1048576`, "the config after the reload")
}

// Each decision is one round trip to Redis: the bucket script, and no
// other command, once per admitted call (the first call also loads the
// script into Redis). A bucket costs Redis one small string.
func TestOneRoundTripPerDecision(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := startUpstream(t)
	a := fleettest.StartNode(t, site(up, redisStore(sharedTimeout, "local", srv.URL()), rateLimit("per_client", "100/1m")))

	stats := func() map[string]int { return commandStats(srv.CLI(t, "INFO", "commandstats")) }
	fresh := stats()
	require.Equal(t, "done", call(t, a).outcome)
	warm := stats()
	t.Logf("commands Redis ran for the first call (a connection's setup if it opened one, the script's load, what the script calls): %v", delta(fresh, warm))

	// INFO commandstats counts the commands a script calls too: MONITOR
	// tells the commands a client sent from those.
	mon := startMonitor(t, srv)
	const calls = 20
	latencies := make([]time.Duration, calls)
	for i := range calls {
		ans := call(t, a)
		require.Equal(t, "done", ans.outcome)
		latencies[i] = ans.latency
	}
	sent := mon.sent(t, srv)
	ran := delta(warm, stats())
	// A connection the node opens along the way (clients spread their
	// requests over a few) is set up with commands of its own, once, and
	// one that stays idle is kept alive with a PING every 200 ms: neither
	// is a decision's. (On a loaded machine 20 calls take long enough for
	// a few.)
	perDecision := 0
	for name, n := range sent {
		if !connectionUpkeep[name] {
			perDecision += n
		}
	}
	t.Logf("%d admitted calls: the node sent %v (%.2f round trips a call, connections' upkeep aside); Redis ran %v",
		calls, sent, float64(perDecision)/calls, ran)
	slices.Sort(latencies)
	t.Logf("call latency through the node with Redis deciding: median %s, max %s",
		latencies[calls/2].Round(10*time.Microsecond), latencies[calls-1].Round(10*time.Microsecond))
	assert.Equal(t, calls, ran["evalsha"]+ran["eval"], "bucket scripts run (EVALSHA and EVAL)")
	assert.Equal(t, calls, perDecision, "commands the node sent, connections' upkeep aside: %v", sent)

	key := bucketKey("per_client", "127.0.0.1")
	bytes, err := strconv.Atoi(srv.CLI(t, "MEMORY", "USAGE", key))
	require.NoError(t, err, "MEMORY USAGE %s", key)
	t.Logf("bucket %s: MEMORY USAGE %d bytes, PTTL %s ms, value %q", key, bytes,
		srv.CLI(t, "PTTL", key), srv.CLI(t, "GET", key))
	assert.Positive(t, bytes)
	assert.Equal(t, "1", srv.CLI(t, "DBSIZE"), "keys in Redis: one bucket")
}

// connectionUpkeep are the commands a client sends of its own, not for a
// request: on a new connection, before any request, the protocol,
// credentials, database and its name; on an idle one, the keep-alive.
var connectionUpkeep = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "ping": true}

// monitor is a redis-cli MONITOR: every command the server runs, one a
// line, those a script calls marked [db lua].
type monitor struct {
	lines chan string
}

func startMonitor(t *testing.T, srv *redistest.Server) *monitor {
	t.Helper()
	_, port, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	cmd := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", port, "MONITOR")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	m := &monitor{lines: make(chan string, 64)}
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		defer close(m.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case m.lines <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	require.Equal(t, "OK", m.next(t), "redis-cli MONITOR's first line")
	return m
}

func (m *monitor) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-m.lines:
		require.True(t, ok, "redis-cli MONITOR ended")
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("redis-cli MONITOR: no line in 10 seconds")
		return ""
	}
}

// monitorLine is a MONITOR line: the time, [db client], the command.
var monitorLine = regexp.MustCompile(`^\d+\.\d+ \[\d+ (\S+)\] "([^"]+)"`)

// sent are the commands clients sent since the monitor started, by name,
// up to a marker this sends through srv; the commands scripts called are
// left out.
func (m *monitor) sent(t *testing.T, srv *redistest.Server) map[string]int {
	t.Helper()
	const marker = "end-of-calls"
	require.Equal(t, marker, srv.CLI(t, "ECHO", marker))
	sent := make(map[string]int)
	for {
		line := m.next(t)
		if strings.Contains(line, marker) {
			return sent
		}
		match := monitorLine.FindStringSubmatch(line)
		require.NotNil(t, match, "MONITOR line %q", line)
		if match[1] != "lua" {
			sent[strings.ToLower(match[2])]++
		}
	}
}

// delta is what ran between two INFO commandstats, the redis-cli INFO
// that read them left out.
func delta(before, after map[string]int) map[string]int {
	d := make(map[string]int)
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if n := after[name] - before[name]; n > 0 && name != "info" {
			d[name] = n
		}
	}
	return d
}

// Redis holds no key as the client sent it (the fleet example of docs/operating.md
// keys a limit on Authorization: whoever reads Redis, a replica, a backup,
// MONITOR, would read every client's token), and neither do the node's
// status and log without log_key. The buckets are shared as the keys are:
// one token, however it is spelt, one bucket; two tokens, two. Found by an
// attacker's review: keys of 128 bytes or less were stored as sent.
func TestRedisHoldsNoKeyAsTheClientSentIt(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := startUpstream(t)
	n := fleettest.StartNode(t, site(up, redisStore(sharedTimeout, "local", srv.URL()),
		rateLimit("per_token", "2/1h", "key {http.request.header.Authorization}"),
		rateLimit("per_client", "1000/1h", "key {http.request.header."+clientHeader+"}")))

	const alice, bob = "fleet1-alice-4f6e1c2a9b", "fleet2-bob-7d3b8e0f5a"
	calls := []struct{ authorization, client, want string }{
		{"Bearer " + alice, "ci-runner", "done"},
		{"bearer   " + alice, "laptop", "done"},
		{"Bearer " + alice, "ci-runner", rateLimited},
		{"Bearer " + bob, "laptop", "done"},
	}
	for i, c := range calls {
		a, err := sendWith(n, http.Header{"Authorization": {c.authorization}, clientHeader: {c.client}})
		require.NoError(t, err)
		assert.Equal(t, c.want, a.outcome, "call %d (%s, %s)", i+1, c.authorization, c.client)
	}

	held := strings.Split(srv.CLI(t, "--scan"), "\n")
	assert.ElementsMatch(t, []string{
		bucketKey("per_token", "bearer "+alice), bucketKey("per_token", "bearer "+bob),
		bucketKey("per_client", "ci-runner"), bucketKey("per_client", "laptop"),
	}, held, "one bucket a key, under its digest")
	resp, err := client.Get(n.Admin() + "/mcp/status")
	require.NoError(t, err)
	status, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	log := n.Log()
	for _, secret := range []string{alice, bob, "ci-runner", "laptop"} {
		for _, key := range held {
			assert.NotContains(t, key, secret, "a key in Redis")
		}
		assert.NotContains(t, string(status), secret, "/mcp/status")
		assert.NotContains(t, log, secret, "the node's log")
	}
	sum := sha256.Sum256([]byte("bearer " + alice))
	assert.Contains(t, log, `"limit":"per_token","key":"sha256:`+hex.EncodeToString(sum[:8])+`"`,
		"the refusal's log line shows the key's digest")
}
