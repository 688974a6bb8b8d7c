package fleet

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/redistest"
)

const rateLimited = string(envelope.RateLimited)

// A limit of 5 calls a minute per client is 5 calls a minute across the
// fleet: a client that spreads its calls over two nodes (both see it as
// 127.0.0.1) gets 5 in all, then both nodes refuse it and tell it the same
// wait.
func TestNodesShareOneLimit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := startUpstream(t)
	body := site(up, redisStore(sharedTimeout, "local", srv.URL()), rateLimit("per_client", "5/1m"))
	a, b := fleettest.StartNode(t, body), fleettest.StartNode(t, body)

	answers := alternate(t, 12, a, b)
	requireSharedLimit(t, answers, 5)
	assert.EqualValues(t, 5, up.calls.Load(), "calls that reached the upstream")

	t.Run("each node on its own without a store", func(t *testing.T) {
		up := startUpstream(t)
		body := site(up, rateLimit("per_client", "5/1m"))
		a, b := fleettest.StartNode(t, body), fleettest.StartNode(t, body)
		answers := alternate(t, 14, a, b)
		assert.Equal(t, append(repeat("done", 10), repeat(rateLimited, 4)...), outcomes(answers),
			"each node admits its own 5")
		assert.EqualValues(t, 10, up.calls.Load(), "calls that reached the upstream")
	})
}

// requireSharedLimit checks answers to calls alternated over the nodes of
// a fleet sharing a limit of burst calls: the first burst admitted, every
// later one refused with RATE_LIMITED by whichever node it reached, and the
// same retry_after from every node (to the second: they are rounded up,
// and a little time passes between calls).
func requireSharedLimit(t *testing.T, answers []answer, burst int) {
	t.Helper()
	require.Equal(t, append(repeat("done", burst), repeat(rateLimited, len(answers)-burst)...), outcomes(answers))
	byNode := make(map[string][]float64)
	for _, a := range answers[burst:] {
		byNode[a.node] = append(byNode[a.node], a.env.RetryAfter)
		assert.Contains(t, a.env.Message, "Rate limit exceeded")
	}
	var all []float64
	for node, ra := range byNode {
		t.Logf("%s: retry_after %v seconds", node, ra)
		all = append(all, ra...)
	}
	require.Len(t, byNode, 2, "refusals from both nodes")
	assert.LessOrEqual(t, slices.Max(all)-slices.Min(all), 1.0, "retry_after from the nodes: %v", byNode)
	assert.Positive(t, slices.Min(all))
}

// A refill made on Redis's clock is seen by every node: once a client has
// spent its burst on node A, node B refuses it too, and admits it again
// when a token has come back, 5 seconds later at 2 calls per 10 seconds,
// not before.
//
// Redis and this test read the same machine's clock, so what must happen
// follows from instants the test took, whatever a loaded machine makes
// each call cost: the first token came back 5 seconds after Redis took it,
// which it did between sending A's first call and having its answer.
func TestRefillIsSeenByEveryNode(t *testing.T) {
	t.Parallel()
	const refill = 5 * time.Second
	srv := redistest.Start(t)
	up := startUpstream(t)
	body := site(up, redisStore(sharedTimeout, "local", srv.URL()), rateLimit("per_client", "2/10s", "burst 2"))
	a, b := fleettest.StartNode(t, body), fleettest.StartNode(t, body)

	sentFirst := time.Now()
	first := call(t, a)
	require.Equal(t, "done", first.outcome)
	require.Equal(t, "done", call(t, a).outcome)
	onB := call(t, b)
	require.Less(t, onB.at.Sub(sentFirst), refill, "three calls took longer than a token takes to come back")
	require.Equal(t, rateLimited, onB.outcome, "B right after A spent the burst")
	// Rounded up to the second: at most the whole refill, at least what
	// was left of it when B's answer came.
	assert.LessOrEqual(t, onB.env.RetryAfter, refill.Seconds(), "retry_after on B")
	assert.GreaterOrEqual(t, onB.env.RetryAfter, math.Ceil((refill - onB.at.Sub(sentFirst)).Seconds()), "retry_after on B")

	// B is asked until it admits. A call answered before the token can
	// have come back is refused; a call sent after it surely came back is
	// admitted.
	var polls []answer
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a, err := send(b)
		require.NoError(c, err)
		polls = append(polls, a)
		require.Equal(c, "done", a.outcome)
	}, 3*refill, 50*time.Millisecond)
	back, surelyBack := sentFirst.Add(refill), first.at.Add(refill+clockSlack)
	for i, p := range polls {
		sent := p.at.Add(-p.latency)
		if p.at.Before(back) {
			assert.Equal(t, rateLimited, p.outcome, "call %d to B, answered %s before the token came back", i, back.Sub(p.at))
		}
		if !sent.Before(surelyBack) {
			assert.Equal(t, "done", p.outcome, "call %d to B, sent %s after the token came back", i, sent.Sub(surelyBack))
		}
	}
	admitted := polls[len(polls)-1]
	t.Logf("B admitted again %s after A's first call was sent (%s after it was answered), after %d calls",
		admitted.at.Sub(sentFirst).Round(time.Millisecond), admitted.at.Sub(first.at).Round(time.Millisecond), len(polls))
	assert.EqualValues(t, 3, up.calls.Load(), "calls that reached the upstream")
}

// clockSlack covers Redis counting time in microseconds, and reading the
// clock once for a script: a call sent this long after an instant is
// decided after it.
const clockSlack = time.Millisecond

// The same fleet on a Redis Cluster of 3 masters, the addresses naming
// every node: the cluster client sends each bucket's script to the master
// of its slot, and the limit is as shared as on one server. Each bucket is
// a key of its own slot, chosen by the hash tag of the limit and the key,
// so the buckets of many limits and clients spread over the masters.
func TestNodesShareOneLimitOnACluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	up := startUpstream(t)
	body := site(up, redisStore(sharedTimeout, "local", cluster.URLs()...),
		rateLimit("per_client", "5/1m"),
		rateLimit("tool_calls", "1000/1h", "key {http.mcp.tool}"))
	a, b := fleettest.StartNode(t, body), fleettest.StartNode(t, body)

	answers := alternate(t, 12, a, b)
	requireSharedLimit(t, answers, 5)
	assert.EqualValues(t, 5, up.calls.Load(), "calls that reached the upstream")
	for _, n := range []*fleettest.Node{a, b} {
		s := requireStatus(t, n)
		assert.True(t, s.Healthy, "%+v", s)
		assert.Equal(t, strings.Join(cluster.Addrs(), ","), s.Redis)
	}

	// Where the two buckets are: their slots, and the master holding each.
	// Slots follow from the keys' hash tags, and redis-cli gives each master
	// an equal range of them, so these two land on two masters every time
	// (slots 11237 and 6781: the limits' names are chosen so).
	holders := make(map[string]bool)
	for _, key := range []string{bucketKey("per_client", "127.0.0.1"), bucketKey("tool_calls", "echo")} {
		slot := cluster.CLI(t, "CLUSTER", "KEYSLOT", key)
		assert.Equal(t, "1", cluster.CLI(t, "EXISTS", key), "bucket %s", key)
		holder := ""
		for _, node := range cluster.Nodes() {
			if node.CLI(t, "CLUSTER", "COUNTKEYSINSLOT", slot) != "0" {
				holder = node.Addr()
			}
		}
		assert.NotEmpty(t, holder, "no master holds %s", key)
		holders[holder] = true
		t.Logf("bucket %s: CLUSTER KEYSLOT %s, on the master %s, PTTL %s ms", key, slot, holder, cluster.CLI(t, "PTTL", key))
	}
	assert.Len(t, holders, 2, "masters holding the two buckets")
}
