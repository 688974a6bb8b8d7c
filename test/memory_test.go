package test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/heapprobe"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Memory and CPU follow the bytes a client sends, never what it declares.
// These tests measure the heap of the test process, where Caddy runs, with
// runtime/metrics.

// heapObjects is the bytes of live heap objects after a full collection.
func heapObjects() uint64 { return heapprobe.Objects() }

// allocated is the bytes allocated on the heap since the process started.
func allocated() uint64 { return heapprobe.Allocated() }

func goroutines() int {
	s := []metrics.Sample{{Name: "/sched/goroutines:goroutines"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// Finding 4: 200 connections declaring 4 MiB bodies and sending a byte a
// second cost 803 MiB of heap (the declared length, allocated up front).
func TestSlowConnectionsDeclaringLargeBodiesCostLittleHeap(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, "mcp\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	addr := strings.TrimPrefix(g.URL, "http://")
	const conns = 500

	// Warm up: the first requests allocate what every later one reuses.
	for range 3 {
		resp, _ := post(t, g.URL+"/mcp", wire.ToolCall("warm", "echo"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	baseGoroutines := goroutines()
	before := heapObjects()

	open := make([]net.Conn, 0, conns)
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	for range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		open = append(open, c)
		_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", addr, 4<<20)
		require.NoError(t, err)
	}
	// Every connection has a goroutine serving it, blocked reading its body.
	require.Eventually(t, func() bool { return goroutines() >= baseGoroutines+conns }, 30*time.Second, 20*time.Millisecond)
	stable := func() uint64 {
		last := heapObjects()
		for range 20 {
			time.Sleep(50 * time.Millisecond)
			now := heapObjects()
			if now <= last+64<<10 {
				return now
			}
			last = now
		}
		return last
	}
	after := stable()

	perConn := (int64(after) - int64(before)) / conns
	t.Logf("heap: %d bytes before, %d with %d slow connections: %d bytes each", before, after, conns, perConn)
	assert.Less(t, perConn, int64(64<<10), "heap per slow connection")
	for _, c := range open {
		_, err := c.Write([]byte(" "))
		assert.NoError(t, err, "the connections are still open: the bound is not met by cutting them")
	}
	assert.Equal(t, 3, rec.count(), "only the warm-up calls reached the upstream")
}

// allocsPerByte posts each body from its own goroutine, all at once, and
// returns the bytes the process allocated meanwhile per byte sent.
func allocsPerByte(t *testing.T, endpoint string, bodies []string, wantStatus int) float64 {
	t.Helper()
	sent := 0
	for _, b := range bodies {
		sent += len(b)
	}
	start := allocated()
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Go(func() {
			resp, _, err := send(endpoint, b)
			if assert.NoError(t, err) {
				assert.Equal(t, wantStatus, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	return float64(allocated()-start) / float64(sent)
}

// Finding 5: a 2 MiB batch of a million numbers cost 196 MiB of heap, and
// eight at once 1.2 GB; 3.7 MiB of {} elements, 2 GB for eight. Whatever
// the defaults let in costs less than 16 times its bytes, in everything the
// process allocates for it (so at its peak too).
func TestWideBatchesCostLessThanSixteenTimesTheirBytes(t *testing.T) {
	rec, upstream := startRecorder(t)
	// What a body costs, not how long it takes: eight bodies of 4 MiB,
	// scanned under the race detector on a loaded machine, may take longer
	// than the default read_body_timeout to arrive.
	g := mcptest.StartGateway(t, "mcp {\n\tread_body_timeout 5m\n}\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	endpoint := g.URL + "/mcp"
	eight := func(body string) []string {
		out := make([]string, 8)
		for i := range out {
			out[i] = body
		}
		return out
	}
	numbers := "[" + strings.Repeat("1,", 1<<20-1) + "1]"
	objects := "[" + strings.Repeat("{},", 1_290_000) + "{}]"
	// Sixteen requests (the most a batch may hold) whose methods and names
	// are long strings with an escape, which the scanner decodes before
	// their length is refused: the costliest batch the defaults take.
	method := `"` + strings.Repeat("m", 120<<10) + `\n"`
	escaped := make([]string, 16)
	for i := range escaped {
		escaped[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s,"params":{"name":%s}}`, i, method, method)
	}
	costly := "[" + strings.Join(escaped, ",") + "]"
	require.Less(t, len(costly), 4<<20)

	for name, c := range map[string]struct {
		bodies []string
		status int
	}{
		"2 MiB of numbers":                          {[]string{numbers}, http.StatusBadRequest},
		"2 MiB of numbers, eight at once":           {eight(numbers), http.StatusBadRequest},
		"3.7 MiB of {}, eight at once":              {eight(objects), http.StatusBadRequest},
		"32 escaped 120 KiB strings, eight at once": {eight(costly), http.StatusOK},
	} {
		ratio := allocsPerByte(t, endpoint, c.bodies, c.status)
		t.Logf("%s: %.2f bytes allocated per byte sent", name, ratio)
		assert.Less(t, ratio, 16.0, name)
	}
	assert.Zero(t, rec.count())
}

// Finding 6: a limit keyed by a 15 KB header value kept the whole value per
// bucket, for as long as the bucket took to refill.
func TestLongKeysAreKeptAsDigests(t *testing.T) {
	// An upstream that keeps nothing of what it receives.
	up := startUpstream(t)
	g := mcptest.StartGateway(t, `mcp {
	rate_limit per_key {
		key {header.X-Key}
		rate 1/1h
	}
}
reverse_proxy `+up.addr)
	endpoint := g.URL + "/mcp"
	resp, _ := post(t, endpoint, wire.ToolCall("warm", "echo"), withHeader("X-Key", "warm"))
	require.Equal(t, http.StatusOK, resp.StatusCode)

	const keys = 100
	before := heapObjects()
	for i := range keys {
		key := fmt.Sprintf("%03d", i) + strings.Repeat("k", 15_000)
		resp, _ := post(t, endpoint, wire.ToolCall("1", "echo"), withHeader("X-Key", key))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp, out := post(t, endpoint, wire.ToolCall("2", "echo"), withHeader("X-Key", key))
		require.Equal(t, "RATE_LIMITED", wire.Outcome(out), "each long key has its own bucket (%d)", resp.StatusCode)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	retained := int64(heapObjects()) - int64(before)
	t.Logf("%d buckets keyed by 15 KB values retain %d bytes of heap", keys, retained)
	assert.Less(t, retained, int64(keys*1024), "a bucket keeps a digest of its key, not the key")
	assert.EqualValues(t, keys+1, up.received.Load())
}

// Finding: a 21 MiB tools/list answer cost 28 to 34 MiB of peak heap,
// though lists are read up to 8 MiB only: the answer was gathered by
// append up to the bound (about five times the bound allocated as the
// slice grew) before it was found too long. An answer over the bound costs
// at most the bound: nothing at all when its Content-Length says so, and
// when it says nothing, what is held until it passes the bound, in chunks
// never copied. So with a tools policy, which holds the answer to filter
// it.
func TestAToolsListOverTheReadBoundCostsAtMostTheBound(t *testing.T) {
	const readBound = 8 << 20 // maxListBody: see Arguments checked at the edge
	var tools []string
	for i, n := 0, 0; n < 21<<20; i++ {
		tools = append(tools, fmt.Sprintf(`{"name":"tool_%06d_%s","inputSchema":{"type":"object"}}`, i, strings.Repeat("x", 1000)))
		n += len(tools[i]) + 1
	}
	list := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Join(tools, ",") + `]}}`)
	for name, c := range map[string]struct {
		declared bool
		site     string
		outcome  func(t *testing.T, read int64)
	}{
		"validate, Content-Length declared":     {true, "mcp {\n\tvalidate\n}", passedWhole(len(list))},
		"validate, no length declared":          {false, "mcp {\n\tvalidate\n}", passedWhole(len(list))},
		"tools policy, no length declared":      {false, "mcp {\n\tvalidate\n\ttools {\n\t\tdeny secret_*\n\t}\n}", refusedUnread},
		"tools policy, Content-Length declared": {true, "mcp {\n\tvalidate\n\ttools {\n\t\tdeny secret_*\n\t}\n}", refusedUnread},
	} {
		t.Run(name, func(t *testing.T) {
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if c.declared {
					w.Header().Set("Content-Length", fmt.Sprint(len(list)))
				}
				_, _ = w.Write(list)
			}))
			t.Cleanup(upstream.Close)
			g := mcptest.StartGateway(t, c.site+"\nreverse_proxy "+strings.TrimPrefix(upstream.URL, "http://"))
			for range 2 {
				// The second time, whatever the first set up once (pools,
				// connections) is there already.
				heapObjects()
				start := allocated()
				resp, err := openWith(newSendConfig(t.Context(), nil), g.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
				require.NoError(t, err)
				read, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				cost := int64(allocated() - start)
				t.Logf("a %d-byte answer cost %d bytes", len(list), cost)
				assert.Less(t, cost, int64(readBound+1<<20))
				c.outcome(t, read)
			}
		})
	}
}

// passedWhole checks the client got the whole answer, as the upstream sent it.
func passedWhole(n int) func(t *testing.T, read int64) {
	return func(t *testing.T, read int64) { assert.EqualValues(t, n, read) }
}

// refusedUnread checks the client got the gateway's short answer in place
// of a list it could not filter.
func refusedUnread(t *testing.T, read int64) { assert.Less(t, read, int64(4<<10)) }
