package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
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
