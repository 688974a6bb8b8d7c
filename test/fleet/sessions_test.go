package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// The sessions' fleet: stateful replicas behind two nodes that share keys
// (the same secret, or the same storage) and nothing else. A session
// opened through one node is used through the other: its token names the
// replica that holds it and that replica's own session id, and either node
// opens it.

// sessionsVersion is the protocol revision of the sessions' clients: the
// last one with sessions (2026-07-28 has none).
const sessionsVersion = "2025-11-25"

// Secrets of the sessions' tests (at least 16 bytes each).
const (
	secretA = "fleet-sessions-secret-a-0123456789"
	secretB = "fleet-sessions-secret-b-0123456789"
)

// replica is a stateful upstream: the official Go SDK's server with
// sessions, whose tool whoami answers its name and the session id it
// issued, "r1 <id>", and remembers that id.
type replica struct {
	name, url string
	calls     atomic.Int64
	mu        sync.Mutex
	ids       map[string]bool
}

type whoamiArgs struct{}

func startReplica(t *testing.T, name string) *replica {
	t.Helper()
	r := &replica{name: name, ids: make(map[string]bool)}
	s := mcp.NewServer(&mcp.Implementation{Name: "fleet-replica-" + name, Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Says which replica answered, in which of its sessions."},
		func(_ context.Context, req *mcp.CallToolRequest, _ whoamiArgs) (*mcp.CallToolResult, any, error) {
			r.calls.Add(1)
			id := req.Session.ID()
			r.mu.Lock()
			r.ids[id] = true
			r.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.name + " " + id}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: false})
	r.url = mcptest.ServeMCP(t, h)
	return r
}

// issued is every session id the replica's whoami was called in.
func (r *replica) issued() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.ids))
	for id := range r.ids {
		ids = append(ids, id)
	}
	return ids
}

// sessionsSite is a node's site body: sessions with the given lines
// (secret, ttl), then a proxy to the replicas that pins each session to
// the replica holding it and balances new ones round robin.
func sessionsSite(lines []string, replicas ...*replica) string {
	hosts := make([]string, len(replicas))
	for i, r := range replicas {
		hosts[i] = strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), mcptest.MCPPath)
	}
	sessions := "sessions"
	if len(lines) > 0 {
		sessions += " {\n\t\t" + strings.Join(lines, "\n\t\t") + "\n\t}"
	}
	return "mcp {\n\t" + sessions + "\n}\n" +
		"reverse_proxy " + strings.Join(hosts, " ") + " {\n" +
		"\tlb_policy mcp_session {\n\t\tfallback round_robin\n\t}\n" +
		"\theader_up Host {upstream_hostport}\n}"
}

// routed is one request an alternating transport sent, and its answer.
type routed struct {
	node, method string
	// rpc is the JSON-RPC method of a POST.
	rpc string
	// sent is the request's Mcp-Session-Id, got the response's.
	sent, got string
	status    int
}

// alternating sends a client's requests to the nodes in turn, from the
// first one it is given: its POSTs alternate, and so do its GETs (the
// standalone stream, reopened) on their own, so that the order of the
// POSTs does not depend on when the GET goes. It records every exchange.
type alternating struct {
	base  http.RoundTripper
	nodes []string
	mu    sync.Mutex
	turns map[string]int
	log   []routed
}

func newAlternating(t *testing.T, nodes ...*fleettest.Node) *alternating {
	base := &http.Transport{}
	a := &alternating{base: mcptest.BodyFirst(base), turns: make(map[string]int)}
	for _, n := range nodes {
		a.nodes = append(a.nodes, strings.TrimPrefix(n.URL(), "http://"))
	}
	t.Cleanup(base.CloseIdleConnections)
	return a
}

func (a *alternating) RoundTrip(req *http.Request) (*http.Response, error) {
	a.mu.Lock()
	node := a.nodes[a.turns[req.Method]%len(a.nodes)]
	a.turns[req.Method]++
	a.mu.Unlock()
	resp, e, err := sendTo(a.base, node, req)
	a.mu.Lock()
	a.log = append(a.log, e)
	a.mu.Unlock()
	return resp, err
}

// sendTo sends req to node (host:port) through base, and says what went
// and what came back.
func sendTo(base http.RoundTripper, node string, req *http.Request) (*http.Response, routed, error) {
	e := routed{node: node, method: req.Method, sent: req.Header.Get("Mcp-Session-Id"), rpc: rpcMethod(req)}
	out := req.Clone(req.Context())
	out.URL.Host, out.Host = node, node
	resp, err := base.RoundTrip(out)
	if resp != nil {
		e.status, e.got = resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	return resp, e, err
}

// exchanges is what the transport has sent so far.
func (a *alternating) exchanges() []routed {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.log)
}

// rpcMethod is the method of the JSON-RPC message a POST carries ("" when
// its body cannot be read again).
func rpcMethod(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	var m struct {
		Method string `json:"method"`
	}
	_ = json.NewDecoder(body).Decode(&m)
	return m.Method
}

// opened is a session a client used through the fleet, as the test saw it.
type opened struct {
	// token is the session id the client was given.
	token string
	// replicas are the replicas that answered its calls, and upstreamIDs
	// the session ids they answered in, one per call.
	replicas, upstreamIDs []string
	log                   []routed
}

// useSession opens a session with the official Go SDK client, whose
// requests go to the nodes in turn (the first to nodes[0]), calls whoami
// calls times, and closes it.
func useSession(t *testing.T, calls int, nodes ...*fleettest.Node) opened {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rt := newAlternating(t, nodes...)
	c := mcp.NewClient(&mcp.Implementation{Name: "fleet-sessions", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: nodes[0].URL() + mcptest.MCPPath, HTTPClient: &http.Client{Transport: rt},
	}, &mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	s := opened{token: cs.ID()}
	require.NotEmpty(t, s.token, "the session id the client was given")
	for i := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		require.NoError(t, err, "call %d", i)
		require.False(t, res.IsError, "call %d: %+v", i, res)
		require.Len(t, res.Content, 1, "call %d", i)
		text, ok := res.Content[0].(*mcp.TextContent)
		require.True(t, ok, "call %d: %T", i, res.Content[0])
		name, id, ok := strings.Cut(text.Text, " ")
		require.True(t, ok, "call %d: %q", i, text.Text)
		s.replicas = append(s.replicas, name)
		s.upstreamIDs = append(s.upstreamIDs, id)
	}
	require.NoError(t, cs.Close())
	s.log = rt.exchanges()
	return s
}

// requireSessionsSpanNodes opens sessions sessions of calls calls each
// through both nodes, alternating, and checks that every call succeeded,
// that each session stayed on one replica, that the sessions were spread
// over every replica, and that no client saw a replica's own session id.
func requireSessionsSpanNodes(t *testing.T, a, b *fleettest.Node, replicas ...*replica) {
	t.Helper()
	const sessions, calls = 5, 6
	var all []opened
	for i := range sessions {
		// Every other session is opened through node B.
		nodes := []*fleettest.Node{a, b}
		if i%2 == 1 {
			nodes = []*fleettest.Node{b, a}
		}
		s := useSession(t, calls, nodes...)
		all = append(all, s)

		require.Len(t, slices.Compact(slices.Clone(s.replicas)), 1, "session %d: the replicas that answered its calls: %v", i, s.replicas)
		require.Len(t, slices.Compact(slices.Clone(s.upstreamIDs)), 1, "session %d: the replica's sessions its calls were in: %v", i, s.upstreamIDs)
		assert.NotEqual(t, s.upstreamIDs[0], s.token, "session %d: the client was given the replica's own session id", i)

		byNode := make(map[string]int)
		for _, e := range s.log {
			switch {
			case e.rpc == "initialize":
				assert.Empty(t, e.sent, "session %d: initialize with a session id", i)
			case e.method == http.MethodGet && e.status == 0:
				// The standalone stream, ended by Close before it was
				// answered.
			default:
				assert.Equal(t, s.token, e.sent, "session %d: the session id of %s %s", i, e.method, e.rpc)
				assert.Less(t, e.status, 300, "session %d: %s %s through %s", i, e.method, e.rpc, e.node)
			}
			if e.got != "" {
				assert.Equal(t, s.token, e.got, "session %d: the session id of the answer to %s %s", i, e.method, e.rpc)
			}
			if e.rpc == "tools/call" && e.status == http.StatusOK {
				byNode[e.node]++
			}
		}
		assert.Equal(t, map[string]int{
			strings.TrimPrefix(a.URL(), "http://"): calls / 2,
			strings.TrimPrefix(b.URL(), "http://"): calls / 2,
		}, byNode, "session %d: its tool calls answered through each node", i)
		assert.True(t, slices.ContainsFunc(s.log, func(e routed) bool {
			return e.method == http.MethodDelete && e.status < 300
		}), "session %d: Close's DELETE reached the replica: %+v", i, s.log)
	}

	spread := make(map[string]int)
	for _, s := range all {
		spread[s.replicas[0]]++
	}
	t.Logf("sessions by replica: %v", spread)
	assert.Len(t, spread, len(replicas), "the replicas the sessions were spread over")

	// No answer the clients saw named a replica's own session.
	var upstreamIDs []string
	for _, r := range replicas {
		upstreamIDs = append(upstreamIDs, r.issued()...)
	}
	require.Len(t, upstreamIDs, sessions, "sessions the replicas issued and answered calls in")
	for _, s := range all {
		for _, e := range s.log {
			for _, id := range upstreamIDs {
				assert.NotContains(t, e.got, id, "the answer to %s %s through %s", e.method, e.rpc, e.node)
			}
		}
	}
}

// sessionsStatus is the sessions as a node's GET /mcp/status shows them.
type sessionsStatus struct {
	Keys       string `json:"keys"`
	KeysHeld   int    `json:"keys_held"`
	SealingKey string `json:"sealing_key"`
}

func requireSessionsStatus(t *testing.T, n *fleettest.Node) sessionsStatus {
	t.Helper()
	resp, err := client.Get(n.Admin() + "/mcp/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var s struct {
		Handlers []struct {
			Features struct {
				Sessions *sessionsStatus `json:"sessions"`
			} `json:"features"`
		} `json:"handlers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	require.Len(t, s.Handlers, 1)
	require.NotNil(t, s.Handlers[0].Features.Sessions, "the sessions of the node on %s", n.URL())
	return *s.Handlers[0].Features.Sessions
}

// Two nodes configured with the same secret are one gateway to a client:
// each of 5 sessions, whose requests alternate between the nodes, has all
// its calls answered by the one replica that opened it, the round robin
// spreads the sessions over both replicas, and the client only ever sees
// the gateway's sealed session ids, never a replica's.
func TestSessionsSharedSecretSpanNodes(t *testing.T) {
	t.Parallel()
	r1, r2 := startReplica(t, "r1"), startReplica(t, "r2")
	body := sessionsSite([]string{"secret " + secretA, "ttl 1h"}, r1, r2)
	a, b := fleettest.StartNode(t, body), fleettest.StartNode(t, body)

	sa, sb := requireSessionsStatus(t, a), requireSessionsStatus(t, b)
	require.Equal(t, "secrets", sa.Keys)
	require.Equal(t, sa, sb, "the nodes' keys")

	requireSessionsSpanNodes(t, a, b, r1, r2)
}

// Without a secret, nodes sharing Caddy's storage share the keys the first
// of them generated there: sessions span the nodes as with a secret.
func TestSessionsSharedStorageSpanNodes(t *testing.T) {
	t.Parallel()
	r1, r2 := startReplica(t, "r1"), startReplica(t, "r2")
	storage := t.TempDir()
	body := sessionsSite(nil, r1, r2)
	a, b := fleettest.StartNodeOn(t, body, storage), fleettest.StartNodeOn(t, body, storage)

	sa, sb := requireSessionsStatus(t, a), requireSessionsStatus(t, b)
	require.Equal(t, "storage", sa.Keys)
	require.Equal(t, sa, sb, "the nodes' keys")

	requireSessionsSpanNodes(t, a, b, r1, r2)
}

// The control: nodes with different secrets do not share sessions. A
// request of a session opened through node A is answered through A, and
// refused through B with the revisions' "session not found": HTTP 404 and
// a JSON-RPC error -32001 for the request's id, without reaching a
// replica.
func TestSessionsOtherSecretNotFound(t *testing.T) {
	t.Parallel()
	r1, r2 := startReplica(t, "r1"), startReplica(t, "r2")
	a := fleettest.StartNode(t, sessionsSite([]string{"secret " + secretA}, r1, r2))
	b := fleettest.StartNode(t, sessionsSite([]string{"secret " + secretB}, r1, r2))
	require.NotEqual(t, requireSessionsStatus(t, a).SealingKey, requireSessionsStatus(t, b).SealingKey)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "fleet-sessions", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: a.URL() + mcptest.MCPPath, HTTPClient: &http.Client{Transport: newAlternating(t, a)},
	}, &mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	token := cs.ID()
	require.NotEmpty(t, token)

	status, raw := postInSession(t, a, token, 101)
	require.Equal(t, http.StatusOK, status, "through node A: %s", raw)
	calls := r1.calls.Load() + r2.calls.Load()
	require.EqualValues(t, 1, calls, "calls that reached a replica")

	status, raw = postInSession(t, b, token, 102)
	require.Equal(t, http.StatusNotFound, status, "through node B: %s", raw)
	var answer struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &answer), "%s", raw)
	assert.JSONEq(t, "102", string(answer.ID))
	assert.Equal(t, -32001, answer.Error.Code)
	assert.Contains(t, answer.Error.Message, "Session not found")
	assert.Equal(t, calls, r1.calls.Load()+r2.calls.Load(), "calls that reached a replica")
}

// postInSession posts a tools/call of whoami with the JSON-RPC id id, in
// the session whose id is token, to the node, and returns the status and,
// when it is 200, the one response the answer holds (else the body).
func postInSession(t *testing.T, n *fleettest.Node, token string, id int) (int, []byte) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`, id)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, n.URL()+mcptest.MCPPath, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", token)
	req.Header.Set("Mcp-Protocol-Version", sessionsVersion)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, raw
	}
	msgs, err := messages(resp.Header.Get("Content-Type"), raw)
	require.NoError(t, err, "%s", raw)
	require.Len(t, msgs, 1, "%s", raw)
	r, err := wire.Read(msgs[0])
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprint(id), string(r.ID), "%s", msgs[0])
	require.Equal(t, "done", wire.Outcome(msgs[0]), "%s", msgs[0])
	return resp.StatusCode, msgs[0]
}
