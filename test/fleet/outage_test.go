package fleet

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/redistest"
)

// outageBurst is the limit of the outage tests: 3 calls a minute per
// client, the whole fleet's while Redis answers.
const outageBurst = 3

// slowestWhileDown is the longest a call may take while Redis is down: the
// store's timeout, for a call that finds Redis gone, then the node's own
// work under the race detector and room for a loaded machine: a lost
// segment on loopback waits for TCP's first retransmission timeout, a
// second. (Two calls of one run were once a second late, in the run whose
// kernel counted two retransmission timeouts; the store, stalled 40 times
// under load with calls in flight, never took 10 ms past its timeout.) A
// call held until Redis answers again is still waiting when this passes:
// the test resumes Redis only after the calls it times.
const slowestWhileDown = outageTimeout + 2*time.Second

// While Redis is down, a fleet answers every call promptly, those in
// flight when it goes down included, and as on_error says: local limits
// each node with its own buckets (a client gets each node's burst), allow
// admits every call, deny refuses every call with SERVER_BUSY saying the
// limits cannot be checked, to retry in 2 seconds.
// /mcp/status says Redis is down. When Redis is back, the nodes find it on
// their own, say so, and share their limits in it again. A killed Redis
// comes back empty, as a crashed cache does; a stalled one comes back with
// its buckets, and may still run a decision that timed out while it was
// stalled.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		onError string
		stall   bool
	}{
		{"local", false},
		{"allow", false},
		{"deny", false},
		{"local", true},
	} {
		name := "on_error " + tt.onError + ", redis killed"
		if tt.stall {
			name = "on_error " + tt.onError + ", redis stalled"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			outage(t, tt.onError, tt.stall)
		})
	}
}

func outage(t *testing.T, onError string, stall bool) {
	srv := redistest.Start(t)
	up := startUpstream(t)
	body := site(up, redisStore(outageTimeout, onError, srv.URL()), rateLimit("per_client", "3/1m", "key {http.request.header."+clientHeader+"}"))
	a, b := fleettest.StartNode(t, body), fleettest.StartNode(t, body)

	// Bob calls all along, so that Redis goes down, and comes back, in
	// the middle of his calls. His first calls open each node's
	// connection to Redis.
	bob := startTraffic(t, "bob", a, b)
	require.Eventually(t, func() bool { return bob.sent() >= 5 }, 10*time.Second, 10*time.Millisecond, "bob's calls before the outage")
	requireHealthy(t, true, a, b)
	// Before the outage Redis decides, and holds one of alice's tokens:
	// the nodes' own buckets are untouched.
	require.Equal(t, "done", alternateAs(t, "alice", 1, a)[0].outcome)

	if stall {
		srv.Stall()
	} else {
		srv.Kill()
	}
	down := alternateAs(t, "alice", 10, a, b)
	latencies := make([]time.Duration, len(down))
	for i, ans := range down {
		latencies[i] = ans.latency
		assert.LessOrEqual(t, ans.latency, slowestWhileDown, "call %d while Redis is down, to %s", i, ans.node)
	}
	sorted := slices.Sorted(slices.Values(latencies))
	t.Logf("alice's calls while Redis is down: first %s, median %s, max %s",
		latencies[0].Round(10*time.Microsecond), sorted[len(sorted)/2].Round(10*time.Microsecond), sorted[len(sorted)-1].Round(10*time.Microsecond))

	switch onError {
	case "local":
		for _, n := range []*fleettest.Node{a, b} {
			var got []string
			for _, ans := range down {
				if ans.node == n.URL() {
					got = append(got, ans.outcome)
				}
			}
			assert.Equal(t, append(repeat("done", outageBurst), repeat(rateLimited, len(got)-outageBurst)...), got,
				"%s, deciding with its own buckets", n.URL())
		}
	case "allow":
		assert.Equal(t, repeat("done", len(down)), outcomes(down))
	case "deny":
		assert.Equal(t, repeat(string(envelope.ServerBusy), len(down)), outcomes(down))
		for _, ans := range down {
			assert.Contains(t, ans.env.Message, "rate limits cannot be checked")
			assert.Equal(t, 2.0, ans.env.RetryAfter)
		}
	}
	for _, n := range []*fleettest.Node{a, b} {
		s := requireStatus(t, n)
		assert.False(t, s.Healthy, "%s while Redis is down: %+v", n.URL(), s)
		assert.NotEmpty(t, s.DownSince, "%s while Redis is down: %+v", n.URL(), s)
		assert.NotEmpty(t, s.LastError, "%s while Redis is down: %+v", n.URL(), s)
		assert.Equal(t, onError, s.OnError)
		t.Logf("%s while Redis is down: down_since %s, last_error %q", n.URL(), s.DownSince, s.LastError)
	}

	if stall {
		srv.Resume()
	} else {
		srv.Restart()
	}
	requireHealthy(t, true, a, b)
	// Shared again: carol, new to Redis and to both nodes, gets what one
	// bucket holds from the two nodes together, then both refuse her.
	carol := alternateAs(t, "carol", 8, a, b)
	requireSharedLimit(t, carol, outageBurst)
	// However many calls each node admitted to alice on its own, the fleet
	// admits what her bucket in Redis holds, then both nodes refuse.
	after := alternateAs(t, "alice", 6, a, b)
	admitted := count(after, "done")
	require.Equal(t, append(repeat("done", admitted), repeat(rateLimited, len(after)-admitted)...), outcomes(after))
	if stall {
		// The bucket kept the token spent before the outage, and each
		// node's decision that timed out, alice's if it was hers, may
		// have run when Redis resumed.
		assert.Contains(t, []int{outageBurst - 3, outageBurst - 2, outageBurst - 1}, admitted, "admitted to alice after Redis resumed")
	} else {
		assert.Equal(t, outageBurst, admitted, "admitted to alice after Redis restarted empty")
	}

	// Bob's calls, in flight when Redis went down and came back: each
	// answered, once, promptly, as his limit or on_error says.
	bobs, errs := bob.end()
	require.Empty(t, errs, "bob's calls")
	slowest := time.Duration(0)
	for _, ans := range bobs {
		slowest = max(slowest, ans.latency)
		want := []string{"done", rateLimited}
		if onError == "deny" {
			want = append(want, string(envelope.ServerBusy))
		}
		assert.Contains(t, want, ans.outcome, "bob's call to %s", ans.node)
	}
	t.Logf("bob's %d calls: %d done, %d RATE_LIMITED, %d SERVER_BUSY; slowest %s", len(bobs), count(bobs, "done"),
		count(bobs, rateLimited), count(bobs, string(envelope.ServerBusy)), slowest.Round(10*time.Microsecond))
	assert.LessOrEqual(t, slowest, slowestWhileDown, "bob's slowest call")

	// Every call was answered once: what the clients were told was
	// admitted is what reached the upstream.
	assert.EqualValues(t, 1+count(down, "done")+outageBurst+admitted+count(bobs, "done"), up.calls.Load(), "calls that reached the upstream")
	for _, n := range []*fleettest.Node{a, b} {
		assert.NotContains(t, n.Log(), "panic", "%s's log", n.URL())
	}
}

// trafficEvery is the pace of a client calling in the background.
const trafficEvery = 20 * time.Millisecond

// traffic is a client calling the nodes in turn, in the background, until
// end.
type traffic struct {
	stop, done chan struct{}
	once       sync.Once
	mu         sync.Mutex
	answers    []answer
	errs       []error
}

func startTraffic(t *testing.T, clientName string, nodes ...*fleettest.Node) *traffic {
	tr := &traffic{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		tick := time.NewTicker(trafficEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			a, err := sendAs(nodes[i%len(nodes)], clientName)
			tr.mu.Lock()
			if err != nil {
				tr.errs = append(tr.errs, err)
			} else {
				tr.answers = append(tr.answers, a)
			}
			tr.mu.Unlock()
			select {
			case <-tr.stop:
				return
			case <-tick.C:
			}
		}
	}()
	// The calls stop before the nodes do, if the test ends early.
	t.Cleanup(func() { tr.end() })
	return tr
}

// sent is the number of calls answered, or failed, so far.
func (tr *traffic) sent() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.answers) + len(tr.errs)
}

// end stops the calls and returns their answers, and the calls that were
// not answered as every call must be.
func (tr *traffic) end() ([]answer, []error) {
	tr.once.Do(func() { close(tr.stop) })
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.answers, tr.errs
}
