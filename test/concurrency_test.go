package test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

func TestConcurrentCallsSplitIntoInFlightQueuedAndServerBusy(t *testing.T) {
	gt := startUpstream(t, holdAll)
	g := mcptest.StartGateway(t, `mcp {
	concurrency {
		max 2
		queue 1
		queue_timeout 1m
	}
}
reverse_proxy `+gt.addr)

	const calls = 6
	results := make(chan string, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, body := post(t, g.URL+"/mcp", wire.NumberedCall(i, "slow"))
			results <- wire.Outcome(body)
		}()
	}
	gt.waitHeld(t, 2)
	// Two are in flight and one waits: the other three are shed at once.
	shed := 0
	for range calls - 3 {
		select {
		case r := <-results:
			assert.Equal(t, "SERVER_BUSY", r)
			shed++
		case <-time.After(10 * time.Second):
			t.Fatal("the calls beyond max and queue were not shed")
		}
	}
	gt.releaseAll()
	wg.Wait()
	close(results)
	done := 0
	for r := range results {
		assert.Equal(t, "done", r)
		done++
	}
	assert.Equal(t, 3, shed)
	assert.Equal(t, 3, done, "max 2 in flight and 1 queued are all served")
}

func TestServerBusyTellsActiveAndQueuedCounts(t *testing.T) {
	gt := startUpstream(t, holdAll)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n}\nreverse_proxy "+gt.addr)

	first := postAsync(t, g.URL+"/mcp", wire.NumberedCall(1, "slow"))
	gt.waitHeld(t, 1)

	resp, body := post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"slow"}}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	r := decodeReply(t, body)
	assert.Equal(t, `"b"`, string(r.ID))
	env, err := wire.ResultEnvelope(body)
	require.NoError(t, err)
	assert.Equal(t, envelope.ServerBusy, env.Code)
	assert.Contains(t, env.Message, "1 call in progress and 0 waiting")
	assert.GreaterOrEqual(t, env.RetryAfter, float64(1))
	assert.Contains(t, env.Recovery, "one at a time")

	// A notification that needs a place has no id to answer: HTTP 503.
	resp, _ = post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"slow"}}`)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	gt.releaseAll()
	<-first
}

func TestPlacesComeBackAfterCancelledCallsAndUpstreamFailures(t *testing.T) {
	gt := startUpstream(t, holdAll)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 2\n\t\tcancel_grace 1h\n\t}\n}\nreverse_proxy "+gt.addr)
	call := wire.NumberedCall(1, "slow")

	// Two calls whose clients give up while the upstream holds them: the
	// upstream goes on running them, so they keep their places until it
	// answers (within cancel_grace).
	clientsLeave(t, gt, 2, g.URL+"/mcp", call)
	_, body := post(t, g.URL+"/mcp", call)
	assert.Equal(t, "SERVER_BUSY", wire.Outcome(body))
	gt.releaseAll()
	require.Eventually(t, func() bool {
		_, body := post(t, g.URL+"/mcp", call)
		return wire.Outcome(body) == "done"
	}, 10*time.Second, 10*time.Millisecond, "the cancelled calls' places never came back")

	// Calls to an upstream that is down fail, and give their place back.
	g.Reload(t, "mcp {\n\tconcurrency {\n\t\tmax 2\n\t}\n}\nreverse_proxy "+mcptest.FreeLoopbackAddr(t))
	for range 3 {
		_, body := post(t, g.URL+"/mcp", call, afterReload(t))
		assert.Equal(t, "HANDOFF_UPSTREAM_UNAVAILABLE", wire.Outcome(body))
	}

	// Both places are free again: two calls in flight at once are admitted.
	g.Reload(t, "mcp {\n\tconcurrency {\n\t\tmax 2\n\t}\n}\nreverse_proxy "+gt.addr)
	results := make(chan string, 2)
	for range 2 {
		postAsync(t, g.URL+"/mcp", call, afterReload(t), into(results))
	}
	for range 2 {
		assert.Equal(t, "done", <-results)
	}
}

func TestGoClientGetsServerBusyAsAResult(t *testing.T) {
	upstream := mcptest.StartDemoServer(t)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	cs := connectGo(t, g.URL+mcptest.MCPPath, &http.Client{})

	// The slow call may itself find the place taken by an echo below: it
	// then tries again, until it holds the place for 3 seconds.
	slow := make(chan error, 1)
	go func() {
		for {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 3000}})
			if err != nil || !res.IsError {
				slow <- err
				return
			}
		}
	}()
	require.Eventually(t, func() bool {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
		require.NoError(t, err, "SERVER_BUSY must come back as a result")
		if !res.IsError {
			return false
		}
		env, err := envelope.Parse(mcptest.TextOf(t, res))
		require.NoError(t, err)
		assert.Equal(t, envelope.ServerBusy, env.Code)
		return true
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, <-slow)
}

func TestQueuedCallThatWaitsTooLongGetsServerBusy(t *testing.T) {
	gt := startUpstream(t, holdAll)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tqueue 1\n\t\tqueue_timeout 100ms\n\t}\n}\nreverse_proxy "+gt.addr)
	call := wire.NumberedCall(1, "slow")
	first := postAsync(t, g.URL+"/mcp", call)
	gt.waitHeld(t, 1)

	_, body := post(t, g.URL+"/mcp", call)
	env, err := wire.ResultEnvelope(body)
	require.NoError(t, err)
	assert.Equal(t, envelope.ServerBusy, env.Code)
	assert.Equal(t, "Server busy: 1 call in progress and 0 waiting; this call waited 100ms in the queue without a free place", env.Message)
	gt.releaseAll()
	<-first
}

// A client that leaves while its call runs does not take its place with it:
// before MCP 2026-07-28 the upstream goes on running the call (closing the
// connection is not a cancellation, and the SDK servers do not stop), so the
// place is held until the upstream has answered, within cancel_grace. Found
// by an attacker's review: calls whose clients hung up at once all ran
// together on a guard of max 1. (abandon_test.go has the grace, and the
// cancellation the upstream is sent.)
func TestAClientThatLeavesKeepsItsPlaceUntilTheUpstreamAnswers(t *testing.T) {
	gt := startUpstream(t, holdAll)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tcancel_grace 1h\n\t}\n}\nreverse_proxy "+gt.addr)
	call := wire.NumberedCall(1, "slow")
	version := withHeader("Mcp-Protocol-Version", "2025-06-18")

	clientsLeave(t, gt, 1, g.URL+"/mcp", call, version)
	for range 3 {
		// Were the place free, the upstream would hold this call too: the
		// outcome would never come.
		select {
		case got := <-postAsync(t, g.URL+"/mcp", call, version):
			assert.Equal(t, "SERVER_BUSY", got, "the upstream still runs the call of the client that left")
		case <-gt.arrived:
			t.Fatal("a second call reached the upstream while the first still ran there")
		}
	}
	gt.releaseAll()
	require.Eventually(t, func() bool {
		_, body := post(t, g.URL+"/mcp", call, version)
		return wire.Outcome(body) == "done"
	}, 10*time.Second, 10*time.Millisecond, "the place comes back once the upstream has answered")
}

// From MCP 2026-07-28, closing the response stream is the cancellation of
// the call: with an upstream said to stop then (upstream_cancels_on_close),
// the place is free again at once.
func TestAClientThatLeavesUnder2026CancelsAndFreesItsPlace(t *testing.T) {
	gt := startUpstream(t, holdAll)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n\tupstream_cancels_on_close\n}\nreverse_proxy "+gt.addr)
	call := wire.NumberedCall(1, "slow")
	version := withHeader("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "slow")

	clientsLeave(t, gt, 1, g.URL+"/mcp", call, version)
	// The upstream was not released: the next call is admitted only if the
	// first one's place came back when its client left.
	var next <-chan string
	require.Eventually(t, func() bool {
		next = postAsync(t, g.URL+"/mcp", call, version)
		select {
		case <-gt.arrived:
			return true
		case got := <-next:
			require.Equal(t, "SERVER_BUSY", got)
			return false
		}
	}, 10*time.Second, 10*time.Millisecond)
	gt.releaseAll()
	assert.Equal(t, "done", receive(t, next))
}

// clientsLeave sends call n times, and has the clients leave once the
// upstream holds every call: it returns when they have left.
func clientsLeave(t *testing.T, up *upstreamDouble, n int, endpoint, call string, opts ...sendOption) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	left := make(chan string, n)
	opts = append(slices.Clip(opts), withContext(ctx), into(left))
	for range n {
		postAsync(t, endpoint, call, opts...)
	}
	up.waitHeld(t, n)
	cancel()
	for range n {
		<-left
	}
}
