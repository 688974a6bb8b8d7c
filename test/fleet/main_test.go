package fleet

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

func TestMain(m *testing.M) { fleettest.Main(m) }

// The fleet's shape: every test runs an MCP server on loopback and Caddy
// nodes in front of it (two, or one where a node alone shows it), each
// node its own process, sharing nothing but the Redis their Caddyfiles
// name.

// upstream is the MCP server behind the nodes: the official Go SDK's, with
// a tool echo that answers its text. It is stateless and answers in JSON,
// so that a bare tools/call POST, without a session, is answered, as one
// JSON-RPC message.
type upstream struct {
	url string
	// calls counts the tool calls that reached it: a call a node admitted
	// reaches it once, one it refused never.
	calls atomic.Int64
}

type echoArgs struct {
	Text string `json:"text"`
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	return startUpstreamBehind(t, func(h http.Handler) http.Handler { return h })
}

// startUpstreamBehind is startUpstream's echo server behind front.
func startUpstreamBehind(t *testing.T, front func(http.Handler) http.Handler) *upstream {
	t.Helper()
	u := &upstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "fleet-upstream", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns the given text unchanged."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	u.url = mcptest.ServeMCP(t, front(h))
	return u
}

// site is a node's site body: an mcp block holding options (one directive
// or block each), then the proxy to the upstream. Servers built on the Go
// SDK refuse a Host that is not theirs on loopback, hence ProxyTo's
// header_up.
func site(up *upstream, options ...string) string {
	return "mcp {\n\t" + strings.ReplaceAll(strings.Join(options, "\n"), "\n", "\n\t") + "\n}\n" + mcptest.ProxyTo(up.url)
}

// The store's timeouts in these tests. The tests of what the fleet shares
// need every decision made in Redis: a node's first decisions open a
// connection and load the bucket script (on a cluster, read first which
// master holds which slots), several round trips that take 5 to 20 ms on
// loopback but far more for a node built with the race detector on a
// loaded machine, and a decision that misses its timeout is made by the
// node alone. Redis never stalls in those tests: they give it ten
// seconds. The tests of what happens while Redis is down need Redis to
// decide before and after the outage too, and the timeout is what a
// client waits for a Redis that stalls: they give it two seconds.
const (
	sharedTimeout = 10 * time.Second
	outageTimeout = 2 * time.Second
)

// redisStore is a store redis block for addresses.
func redisStore(timeout time.Duration, onError string, addresses ...string) string {
	return fmt.Sprintf("store redis {\n\taddress %s\n\ttimeout %s\n\ton_error %s\n}",
		strings.Join(addresses, " "), timeout, onError)
}

// rateLimit is a rate_limit block: a rate, and more lines such as a burst
// or a key.
func rateLimit(name, rate string, lines ...string) string {
	body := append([]string{"rate " + rate}, lines...)
	return "rate_limit " + name + " {\n\t" + strings.Join(body, "\n\t") + "\n}"
}

// client sends every request of the tests on a connection of its own, so
// that a reload, which closes the old server's idle connections, cannot
// leave a POST on a connection being closed. A call that takes 10 seconds
// has hung.
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// answer is how a node answered one tools/call.
type answer struct {
	node string
	// outcome is "done" for the upstream's result, or the code of the
	// gateway's envelope (RATE_LIMITED, SERVER_BUSY, ...).
	outcome string
	// env is the envelope, when the gateway answered.
	env     envelope.Parsed
	latency time.Duration
	// at is when the answer had arrived.
	at time.Time
}

var nextID atomic.Int64

// send posts a tools/call of echo to the node, with an id and a text no
// other call has, and reads the answer. It checks what every answer must
// be, whatever the limits decided: exactly one JSON-RPC response, to this
// call's id, and, when the upstream answered, the text of this call. It
// needs no *testing.T, so that polls and goroutines can call it.
func send(n *fleettest.Node) (answer, error) { return sendAs(n, "") }

// clientHeader names the client, for limits keyed on it
// ({http.request.header.X-Client}), so that clients on one address have
// buckets of their own.
const clientHeader = "X-Client"

// sendAs is send as the named client ("" sends no name).
func sendAs(n *fleettest.Node, clientName string) (answer, error) {
	header := http.Header{}
	if clientName != "" {
		header.Set(clientHeader, clientName)
	}
	return sendWith(n, header)
}

// sendWith is send with more headers.
func sendWith(n *fleettest.Node, header http.Header) (answer, error) {
	id := nextID.Add(1)
	text := fmt.Sprintf("call %d", id)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, text)
	a := answer{node: n.URL()}
	req, err := http.NewRequest(http.MethodPost, n.URL()+"/mcp", strings.NewReader(body))
	if err != nil {
		return a, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for name, values := range header {
		req.Header[name] = values
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return a, fmt.Errorf("call %d to %s: %w", id, n.URL(), err)
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	a.at = time.Now()
	a.latency = a.at.Sub(start)
	if err != nil {
		return a, fmt.Errorf("call %d to %s: reading the answer: %w", id, n.URL(), err)
	}
	msgs, err := messages(resp.Header.Get("Content-Type"), raw)
	if err != nil {
		return a, fmt.Errorf("call %d to %s: %d %w: %s", id, n.URL(), resp.StatusCode, err, raw)
	}
	if len(msgs) != 1 {
		return a, fmt.Errorf("call %d to %s: answered with %d messages, want exactly one: %s", id, n.URL(), len(msgs), raw)
	}
	r, err := wire.Read(msgs[0])
	if err != nil {
		return a, fmt.Errorf("call %d to %s: %w", id, n.URL(), err)
	}
	if string(r.ID) != strconv.FormatInt(id, 10) {
		return a, fmt.Errorf("call %d to %s: answered with id %s: %s", id, n.URL(), r.ID, raw)
	}
	a.outcome = wire.Outcome(msgs[0])
	switch {
	case a.outcome == "done":
		if got, _ := wire.ResultText(r.Result); got != text {
			return a, fmt.Errorf("call %d to %s: the upstream's text is %q, want %q", id, n.URL(), got, text)
		}
	case r.Error != nil:
		a.env, err = envelope.Parse(r.Error.Data.Envelope)
	default:
		a.env, err = envelope.ParseResult(r.Result)
	}
	if err != nil {
		return a, fmt.Errorf("call %d to %s: %s without a readable envelope: %w: %s", id, n.URL(), a.outcome, err, raw)
	}
	return a, nil
}

// messages splits an answer into its JSON-RPC messages: the values of a
// JSON body, or the data of an event stream's events.
func messages(contentType string, raw []byte) ([][]byte, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		var msgs [][]byte
		var data []string
		flush := func() {
			if len(data) > 0 {
				msgs = append(msgs, []byte(strings.Join(data, "\n")))
				data = nil
			}
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				flush()
			} else if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		flush()
		return msgs, sc.Err()
	}
	var msgs [][]byte
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var m json.RawMessage
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("not JSON (%s): %w", contentType, err)
		}
		msgs = append(msgs, m)
	}
}

// call is send, failing the test on a missing or malformed answer.
func call(t *testing.T, n *fleettest.Node) answer {
	t.Helper()
	a, err := send(n)
	require.NoError(t, err)
	return a
}

// callAfterReload is call for the first call after a reload: a connection
// the old config's server accepted as it shut down is closed without an
// answer (Go's http.Server does that to a connection it reads a request on
// after Shutdown began), and a POST that got no byte of an answer, never
// handled, is sent again, as a client should.
func callAfterReload(t *testing.T, n *fleettest.Node) answer {
	t.Helper()
	a, err := send(n)
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		t.Logf("sent again after a reload: %v", err)
		a, err = send(n)
	}
	require.NoError(t, err)
	return a
}

// alternate sends n calls, to each node in turn.
func alternate(t *testing.T, n int, nodes ...*fleettest.Node) []answer {
	t.Helper()
	return alternateAs(t, "", n, nodes...)
}

// alternateAs is alternate as the named client.
func alternateAs(t *testing.T, clientName string, n int, nodes ...*fleettest.Node) []answer {
	t.Helper()
	answers := make([]answer, n)
	for i := range answers {
		a, err := sendAs(nodes[i%len(nodes)], clientName)
		require.NoError(t, err)
		answers[i] = a
	}
	return answers
}

// outcomes are the answers' outcomes, in order.
func outcomes(answers []answer) []string {
	out := make([]string, len(answers))
	for i, a := range answers {
		out[i] = a.outcome
	}
	return out
}

// repeat is n times outcome.
func repeat(outcome string, n int) []string { return slices.Repeat([]string{outcome}, n) }

// count is how many answers had outcome.
func count(answers []answer, outcome string) int {
	n := 0
	for _, a := range answers {
		if a.outcome == outcome {
			n++
		}
	}
	return n
}

// storeStatus is the store as a node's GET /mcp/status shows it.
type storeStatus struct {
	Backend   string `json:"backend"`
	Redis     string `json:"redis"`
	OnError   string `json:"on_error"`
	Healthy   bool   `json:"healthy"`
	DownSince string `json:"down_since"`
	LastError string `json:"last_error"`
}

// status reads the store of the node's mcp handler from the admin API. An
// answer at all says the node's process is alive. During a reload both
// configs' handlers are listed; the newest is last.
func status(n *fleettest.Node) (storeStatus, error) {
	resp, err := client.Get(n.Admin() + "/mcp/status")
	if err != nil {
		return storeStatus{}, fmt.Errorf("status of %s: %w", n.URL(), err)
	}
	defer resp.Body.Close()
	var s struct {
		Handlers []struct {
			Features struct {
				RateLimits struct {
					Store *storeStatus `json:"store"`
				} `json:"rate_limits"`
			} `json:"features"`
		} `json:"handlers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return storeStatus{}, fmt.Errorf("status of %s: %s: %w", n.URL(), resp.Status, err)
	}
	for _, h := range slices.Backward(s.Handlers) {
		if h.Features.RateLimits.Store != nil {
			return *h.Features.RateLimits.Store, nil
		}
	}
	return storeStatus{}, fmt.Errorf("status of %s: no handler with a store", n.URL())
}

// requireStatus is the node's store status, failing the test if the admin
// API does not answer.
func requireStatus(t *testing.T, n *fleettest.Node) storeStatus {
	t.Helper()
	s, err := status(n)
	require.NoError(t, err)
	return s
}

// requireHealthy waits until every node's status says Redis answers (or,
// with healthy false, does not).
func requireHealthy(t *testing.T, healthy bool, nodes ...*fleettest.Node) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range nodes {
			s, err := status(n)
			require.NoError(c, err)
			require.Equal(c, healthy, s.Healthy, "the store's health on %s: %+v", n.URL(), s)
		}
	}, 10*time.Second, 50*time.Millisecond)
}

// metric is the value of the sample of the node's /metrics (admin API)
// whose name is name and whose labels include every one of labels
// (`outcome="redis"`); 0 when there is none.
func metric(t *testing.T, n *fleettest.Node, name string, labels ...string) float64 {
	t.Helper()
	resp, err := client.Get(n.Admin() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	total := 0.0
	for line := range strings.SplitSeq(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		set, value, ok := strings.Cut(rest, "} ")
		if !ok || !containsAll(set, labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		require.NoError(t, err, line)
		total += v
	}
	return total
}

func containsAll(set string, labels []string) bool {
	for _, l := range labels {
		if !strings.Contains(set, l) {
			return false
		}
	}
	return true
}

// commandStats reads INFO commandstats: every command's calls, by command
// name ("evalsha"). Calls refused before they ran (rejected_calls) are
// counted too: they were sent all the same. Calls that failed as they ran
// (failed_calls) are among calls already.
func commandStats(info string) map[string]int {
	stats := make(map[string]int)
	for line := range strings.SplitSeq(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		n := 0
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			if k == "calls" || k == "rejected_calls" {
				c, _ := strconv.Atoi(v)
				n += c
			}
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return stats
}

// bucketKey is the Redis key of a limit's bucket for a key: the store's
// default prefix, then, as a hash tag, the limit and the first 128 bits of
// the key's SHA-256 in hex.
func bucketKey(limit, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "caddy-mcp:{" + limit + ":" + hex.EncodeToString(sum[:16]) + "}"
}
