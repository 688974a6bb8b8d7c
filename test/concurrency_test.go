package test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// gate is an upstream that holds every tools/call until the test opens it,
// and tells the test each time one arrives.
type gate struct {
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
}

func startGate(t *testing.T) (*gate, string) {
	t.Helper()
	g := &gate{arrived: make(chan struct{}, 100), open: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &msg)
		g.arrived <- struct{}{}
		select {
		case <-g.open:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"content":[{"type":"text","text":"done"}]}}`)
	}))
	t.Cleanup(func() {
		g.release()
		srv.CloseClientConnections()
		srv.Close()
	})
	return g, strings.TrimPrefix(srv.URL, "http://")
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) waitArrivals(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("the upstream did not receive %d calls", n)
		}
	}
}

// outcome is what one call came back with: "done", or an envelope code.
func outcome(t *testing.T, body []byte) string {
	t.Helper()
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &resp), "%s", body)
	env, err := envelope.ParseResult(resp.Result)
	if err != nil {
		return "done"
	}
	return string(env.Code)
}

func TestConcurrentCallsSplitIntoInFlightQueuedAndServerBusy(t *testing.T) {
	gt, upstream := startGate(t)
	g := mcptest.StartGateway(t, `mcp {
	concurrency {
		max 2
		queue 1
		queue_timeout 1m
	}
}
reverse_proxy `+upstream)

	const calls = 6
	results := make(chan string, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, body := post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":`+string(rune('0'+i))+`,"method":"tools/call","params":{"name":"slow"}}`)
			results <- outcome(t, body)
		}()
	}
	gt.waitArrivals(t, 2)
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
	gt.release()
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
	gt, upstream := startGate(t)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n}\nreverse_proxy "+upstream)

	first := make(chan struct{})
	go func() {
		defer close(first)
		post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	}()
	gt.waitArrivals(t, 1)

	resp, body := post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"slow"}}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	assert.Equal(t, `"b"`, string(r.ID))
	env, err := envelope.ParseResult(r.Result)
	require.NoError(t, err)
	assert.Equal(t, envelope.ServerBusy, env.Code)
	assert.Contains(t, env.Message, "1 call in progress and 0 waiting")
	assert.GreaterOrEqual(t, env.RetryAfter, float64(1))
	assert.Contains(t, env.Recovery, "one at a time")

	// A notification that needs a place has no id to answer: HTTP 503.
	resp, _ = post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"slow"}}`)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	gt.release()
	<-first
}

func TestPlacesComeBackAfterCancelledCallsAndUpstreamFailures(t *testing.T) {
	gt, upstream := startGate(t)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 2\n\t}\n}\nreverse_proxy "+upstream)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`

	// Two calls whose clients give up while the upstream holds them: the
	// upstream goes on running them, so they keep their places until it
	// answers.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/mcp", strings.NewReader(call))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	gt.waitArrivals(t, 2)
	cancel()
	wg.Wait()
	_, body := post(t, g.URL+"/mcp", call)
	assert.Equal(t, "SERVER_BUSY", outcome(t, body))
	gt.release()
	require.Eventually(t, func() bool {
		_, body := post(t, g.URL+"/mcp", call)
		return outcomeOf(body) == "done"
	}, 10*time.Second, 10*time.Millisecond, "the cancelled calls' places never came back")

	// Calls to an upstream that is down fail, and give their place back.
	g.Reload(t, "mcp {\n\tconcurrency {\n\t\tmax 2\n\t}\n}\nreverse_proxy "+mcptest.FreeLoopbackAddr(t))
	for range 3 {
		_, body := postAfterReload(t, g.URL+"/mcp", call)
		assert.Equal(t, "HANDOFF_UPSTREAM_UNAVAILABLE", outcome(t, body))
	}

	// Both places are free again: two calls in flight at once are admitted.
	g.Reload(t, "mcp {\n\tconcurrency {\n\t\tmax 2\n\t}\n}\nreverse_proxy "+upstream)
	results := make(chan string, 2)
	for range 2 {
		go func() {
			_, body := postAfterReload(t, g.URL+"/mcp", call)
			results <- outcome(t, body)
		}()
	}
	for range 2 {
		assert.Equal(t, "done", <-results)
	}
}

func TestGoClientGetsServerBusyAsAResult(t *testing.T) {
	upstream := mcptest.StartDemoServer(t)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n}\n"+proxyTo(upstream))
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
		env, err := envelope.Parse(textOf(t, res))
		require.NoError(t, err)
		assert.Equal(t, envelope.ServerBusy, env.Code)
		return true
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, <-slow)
}

func TestQueuedCallThatWaitsTooLongGetsServerBusy(t *testing.T) {
	gt, upstream := startGate(t)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tqueue 1\n\t\tqueue_timeout 100ms\n\t}\n}\nreverse_proxy "+upstream)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`
	first := make(chan struct{})
	go func() {
		defer close(first)
		post(t, g.URL+"/mcp", call)
	}()
	gt.waitArrivals(t, 1)

	_, body := post(t, g.URL+"/mcp", call)
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	env, err := envelope.ParseResult(r.Result)
	require.NoError(t, err)
	assert.Equal(t, envelope.ServerBusy, env.Code)
	assert.Equal(t, "Server busy: 1 call in progress and 0 waiting; this call waited 100ms in the queue without a free place", env.Message)
	gt.release()
	<-first
}

// A client that leaves while its call runs does not take its place with it:
// before MCP 2026-07-28 the upstream goes on running the call (closing the
// connection is not a cancellation, and the SDK servers do not stop), so the
// place is held until the upstream has answered. Found by an attacker's
// review: calls whose clients hung up at once all ran together on a guard of
// max 1.
func TestAClientThatLeavesKeepsItsPlaceUntilTheUpstreamAnswers(t *testing.T) {
	gt, upstream := startGate(t)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n}\nreverse_proxy "+upstream)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`

	ctx, cancel := context.WithCancel(t.Context())
	left := make(chan struct{})
	go func() {
		defer close(left)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/mcp", strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	gt.waitArrivals(t, 1)
	cancel()
	<-left

	for range 3 {
		// Were the place free, the upstream would hold this call too: the
		// outcome would never come.
		select {
		case got := <-backgroundWith(t, g.URL+"/mcp", call, "Mcp-Protocol-Version", "2025-06-18"):
			assert.Equal(t, "SERVER_BUSY", got, "the upstream still runs the call of the client that left")
		case <-gt.arrived:
			t.Fatal("a second call reached the upstream while the first still ran there")
		}
	}
	gt.release()
	require.Eventually(t, func() bool {
		_, body := post(t, g.URL+"/mcp", call, "Mcp-Protocol-Version", "2025-06-18")
		return outcomeOf(body) == "done"
	}, 10*time.Second, 10*time.Millisecond, "the place comes back once the upstream has answered")
}

// From MCP 2026-07-28, closing the response stream is the cancellation of
// the call: the upstream stops, and the place is free again.
func TestAClientThatLeavesUnder2026CancelsAndFreesItsPlace(t *testing.T) {
	gt, upstream := startGate(t)
	g := mcptest.StartGateway(t, "mcp {\n\tconcurrency {\n\t\tmax 1\n\t}\n}\nreverse_proxy "+upstream)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`

	ctx, cancel := context.WithCancel(t.Context())
	left := make(chan struct{})
	go func() {
		defer close(left)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/mcp", strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	gt.waitArrivals(t, 1)
	cancel()
	<-left
	// The upstream was not released: the next call is admitted only if the
	// first one's place came back when its client left.
	var next <-chan string
	require.Eventually(t, func() bool {
		next = backgroundWith(t, g.URL+"/mcp", call, "Mcp-Protocol-Version", "2026-07-28")
		select {
		case <-gt.arrived:
			return true
		case got := <-next:
			require.Equal(t, "SERVER_BUSY", got)
			return false
		}
	}, 10*time.Second, 10*time.Millisecond)
	gt.release()
	assert.Equal(t, "done", receive(t, next))
}

// backgroundWith is background with request headers (name, value pairs).
func backgroundWith(t *testing.T, endpoint, body string, header ...string) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			out <- err.Error()
			return
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- outcomeOf(b)
	}()
	return out
}
