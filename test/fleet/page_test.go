package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Results kept whole (results { page }) in a fleet: the nodes share Caddy's
// storage (file_system, one folder), where the sessions' keys and the kept
// results are, and the results' key. A result kept by the node that
// answered the call is read, page by page, through the other node, which
// never saw the call, and still once the first node is gone; the client's
// session, opened through one node and used through both, is the result's
// owner on both.

// Keys of the results' store (at least 32 bytes each).
const (
	pageKeyA = "fleet-page-key-a-0123456789abcdef-0123456789"
	pageKeyB = "fleet-page-key-b-0123456789abcdef-0123456789"
)

// pageBudget is the nodes' budget: a result past it is kept, and a page
// answer fits it.
const pageBudget = 64 << 10

// pageSite is a node's site body: sessions whose keys are in the storage,
// results past 64 KiB kept under key, and a proxy to the text server.
func pageSite(key, server string) string {
	upstream := strings.TrimSuffix(strings.TrimPrefix(server, "http://"), mcptest.MCPPath)
	return "mcp {\n\tsessions\n\tresults {\n\t\tmax 64KiB\n\t\tpage\n\t\tstore {\n\t\t\tkey " + key + "\n\t\t}\n\t}\n}\n" +
		"reverse_proxy " + upstream + " {\n\tlb_policy mcp_session\n\theader_up Host {upstream_hostport}\n}"
}

// steered sends a client's requests to the node it is pointed at, and
// records every exchange.
type steered struct {
	base http.RoundTripper
	mu   sync.Mutex
	node string
	log  []routed
}

func newSteered(t *testing.T, n *fleettest.Node) *steered {
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	s := &steered{base: mcptest.BodyFirst(base)}
	s.to(n)
	return s
}

// to points the client's next requests at n.
func (s *steered) to(n *fleettest.Node) {
	s.mu.Lock()
	s.node = strings.TrimPrefix(n.URL(), "http://")
	s.mu.Unlock()
}

func (s *steered) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	node := s.node
	s.mu.Unlock()
	resp, e, err := sendTo(s.base, node, req)
	s.mu.Lock()
	s.log = append(s.log, e)
	s.mu.Unlock()
	return resp, err
}

// answered counts the exchanges of JSON-RPC method rpc answered 200, by
// node.
func (s *steered) answered(rpc string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	byNode := make(map[string]int)
	for _, e := range s.log {
		if e.rpc == rpc && e.status == http.StatusOK {
			byNode[e.node]++
		}
	}
	return byNode
}

// pageSession opens a session through n with the official Go SDK client,
// without the standalone stream (its GET would stay on the node it was
// opened on), and returns it and the transport that steers it.
func pageSession(t *testing.T, n *fleettest.Node) (*mcp.ClientSession, *steered) {
	t.Helper()
	st := newSteered(t, n)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "fleet-page", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: n.URL() + mcptest.MCPPath, HTTPClient: &http.Client{Transport: st}, DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.NotEmpty(t, cs.ID())
	return cs, st
}

// pagedCall calls dump {n} and returns its preview, its link, and the URI
// the warning says to read on from.
func pagedCall(t *testing.T, cs *mcp.ClientSession, n int) (preview string, link *mcp.ResourceLink, next string) {
	t.Helper()
	return mcptest.Paged(t, mcptest.CallDump(t, cs, n))
}

// readPages reads from uri to the last page, each checked
// (mcptest.ReadPages), page i through nodes[i%len(nodes)], and returns the
// text read and the URIs of the pages.
func readPages(t *testing.T, cs *mcp.ClientSession, st *steered, uri string, nodes ...*fleettest.Node) (string, []string) {
	t.Helper()
	return mcptest.ReadPages(t, cs, uri, pageBudget, func(i int) { st.to(nodes[i%len(nodes)]) })
}

// notFound is how a read was refused: the JSON-RPC error's message and
// data.
type notFound struct{ message, data string }

// pageNotFound asserts that reading uri through n is answered NOT_FOUND,
// and returns how.
func pageNotFound(t *testing.T, cs *mcp.ClientSession, st *steered, n *fleettest.Node, uri string) notFound {
	t.Helper()
	st.to(n)
	message, data := mcptest.PageNotFound(t, cs, uri)
	return notFound{message, data}
}

// resultsKept is how many results the node's store counts as its own
// (GET /mcp/status): those it wrote, not those it read.
func resultsKept(t *testing.T, n *fleettest.Node) int {
	t.Helper()
	resp, err := client.Get(n.Admin() + "/mcp/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var s struct {
		Handlers []struct {
			Features struct {
				Results *struct {
					Store struct {
						Results int `json:"results"`
					} `json:"store"`
				} `json:"results"`
			} `json:"features"`
		} `json:"handlers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	require.Len(t, s.Handlers, 1)
	require.NotNil(t, s.Handlers[0].Features.Results, "the results of the node on %s", n.URL())
	return s.Handlers[0].Features.Results.Store.Results
}

// A 4 MiB result a call through node A kept is read back through node B,
// every page, byte for byte, by the session that made the call (opened
// through A); read again alternating between the nodes; and once more
// from its start through B after A has stopped. Another session's read
// through B, like a made-up link's, is NOT_FOUND. A node on the same
// storage but with another key of the results finds none of the pages:
// every read is that same NOT_FOUND.
func TestPageReadOnAnotherNode(t *testing.T) {
	t.Parallel()
	const n = 4 << 20
	want := mcptest.LongText(n)
	server := mcptest.StartTextServer(t)
	storage := t.TempDir()
	a := fleettest.StartNodeOn(t, pageSite(pageKeyA, server), storage)
	b := fleettest.StartNodeOn(t, pageSite(pageKeyA, server), storage)
	require.Equal(t, requireSessionsStatus(t, a), requireSessionsStatus(t, b), "the nodes' session keys")
	cs, st := pageSession(t, a)

	preview, link, next := pagedCall(t, cs, n)
	require.NotEmpty(t, preview)
	require.True(t, strings.HasPrefix(want, preview), "the preview is the text's beginning")
	assert.Equal(t, int64(len(want)), *link.Size)
	assert.Equal(t, link.URI+"?from="+strconv.Itoa(len(preview)), next)
	assert.Equal(t, []int{1, 0}, []int{resultsKept(t, a), resultsKept(t, b)}, "the results each node wrote")

	began := time.Now()
	rest, onB := readPages(t, cs, st, next, b)
	readOnB := time.Since(began)
	require.Equal(t, len(want), len(preview)+len(rest))
	require.True(t, preview+rest == want, "reassembled byte for byte from B's pages")
	assert.Greater(t, len(onB), n/pageBudget, "read in pages")
	// A page's text is cut to fit its answer, whose request id grows:
	// these pages need not begin where the first reading's did.
	alternated, onBoth := readPages(t, cs, st, next, a, b)
	require.True(t, alternated == rest, "the pages read alternating between the nodes")

	host := func(n *fleettest.Node) string { return strings.TrimPrefix(n.URL(), "http://") }
	assert.Equal(t, map[string]int{host(a): 1}, st.answered("tools/call"), "the call, through A only")
	assert.Equal(t, map[string]int{host(a): (len(onBoth) + 1) / 2, host(b): len(onB) + len(onBoth)/2},
		st.answered("resources/read"), "the pages read through each node")

	other, otherSt := pageSession(t, b)
	madeUp := "caddymcp://results/" + strings.Repeat("A", 43)
	refusal := pageNotFound(t, cs, st, b, madeUp)
	assert.Equal(t, refusal, pageNotFound(t, other, otherSt, b, link.URI), "another session's read of the link")
	assert.Equal(t, refusal, pageNotFound(t, other, otherSt, b, next), "another session's read of the next page")

	a.Stop()
	whole, fromStart := readPages(t, cs, st, link.URI, b)
	require.True(t, whole == want, "read from its start through B, A stopped")
	t.Logf("%d bytes: a preview of %d bytes, then %d pages through B (in %v), %d alternating, %d from the start with A stopped",
		len(want), len(preview), len(onB), readOnB.Round(time.Millisecond), len(onBoth), len(fromStart))

	c := fleettest.StartNodeOn(t, pageSite(pageKeyB, server), storage)
	for _, uri := range append(fromStart, onB...) {
		require.Equal(t, refusal, pageNotFound(t, cs, st, c, uri), "%s through a node with another key", uri)
	}
}
