package test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// recorder is an upstream that answers every request with a fixed JSON-RPC
// result and remembers what it received.
type recorder struct {
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method string
	header http.Header
	body   []byte
}

func startRecorder(t *testing.T) (*recorder, string) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.requests = append(rec.requests, recorded{r.Method, r.Header.Clone(), body})
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

func (rec *recorder) last(t *testing.T) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.requests, "the upstream received nothing")
	return rec.requests[len(rec.requests)-1]
}

func TestPlaceholdersReachTheUpstream(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, `mcp
reverse_proxy `+strings.TrimPrefix(upstream, "http://")+` {
	header_up X-Method {http.mcp.method}
	header_up X-Tool {http.mcp.tool}
	header_up X-Id {http.mcp.id}
	header_up X-Session {http.mcp.session_id}
	header_up X-Protocol {http.mcp.protocol_version}
	header_up X-Batch {http.mcp.batch_size}
}`)
	body := `{"jsonrpc":"2.0","id":"call-9","method":"tools/call","params":{"name":"search_docs","arguments":{"q":"\u00e9  x"}}}`
	post(t, g.URL+"/mcp", body, withHeader("Mcp-Session-Id", "sess-1", "MCP-Protocol-Version", "2025-11-25"))

	got := rec.last(t)
	assert.Equal(t, body, string(got.body), "the upstream receives the body byte for byte")
	assert.Equal(t, "tools/call", got.header.Get("X-Method"))
	assert.Equal(t, "search_docs", got.header.Get("X-Tool"))
	assert.Equal(t, "call-9", got.header.Get("X-Id"))
	assert.Equal(t, "sess-1", got.header.Get("X-Session"))
	assert.Equal(t, "2025-11-25", got.header.Get("X-Protocol"))
	assert.Empty(t, got.header.Get("X-Batch"))

	post(t, g.URL+"/mcp", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	got = rec.last(t)
	assert.Equal(t, "ping", got.header.Get("X-Method"), "a batch shows its first message")
	assert.Equal(t, "2", got.header.Get("X-Batch"))
}

func TestEachClientAddressHasItsOwnBucket(t *testing.T) {
	_, upstream := startRecorder(t)
	// The gateway trusts X-Forwarded-For from loopback, as it would from a
	// load balancer, so {client_ip} is the address that header names.
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Global: "servers {\n\ttrusted_proxies static 127.0.0.1/32\n}",
		Site: `mcp {
	rate_limit per_client {
		rate 1/1h
	}
}
reverse_proxy ` + strings.TrimPrefix(upstream, "http://"),
	})

	call := wire.NumberedCall(1, "echo")
	codeFor := func(client string) string {
		_, body := post(t, g.URL+"/mcp", call, withHeader("X-Forwarded-For", client))
		if env, err := envelope.ParseResult(decodeReply(t, body).Result); err == nil {
			return string(env.Code)
		}
		return "forwarded"
	}
	assert.Equal(t, "forwarded", codeFor("192.0.2.1"))
	assert.Equal(t, "RATE_LIMITED", codeFor("192.0.2.1"))
	assert.Equal(t, "forwarded", codeFor("192.0.2.2"), "another client has a full bucket")
	assert.Equal(t, "RATE_LIMITED", codeFor("192.0.2.2"))
}

func TestReloadKeepsBucketsAndAppliesTheNewRate(t *testing.T) {
	_, upstream := startRecorder(t)
	site := func(rate string) string {
		return "mcp {\n\trate_limit per_client {\n\t\trate " + rate + "\n\t}\n}\nreverse_proxy " + strings.TrimPrefix(upstream, "http://")
	}
	g := mcptest.StartGateway(t, site("1/1h"))
	call := wire.NumberedCall(1, "echo")
	retryAfter := func() string {
		resp, _ := post(t, g.URL+"/mcp", call, afterReload(t))
		return resp.Header.Get("Retry-After")
	}
	require.Empty(t, retryAfter(), "the first call is forwarded")
	require.Equal(t, "3600", retryAfter())

	g.Reload(t, site("1/1h"))
	assert.Equal(t, "3600", retryAfter(), "a reload with the same settings keeps the empty bucket")

	g.Reload(t, site("60/1h"))
	got := retryAfter()
	assert.Contains(t, []string{"60", "59"}, got, "the new rate applies to the existing, still empty bucket")
}
