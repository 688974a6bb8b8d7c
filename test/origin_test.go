package test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// originRequest sends method to endpoint with the given Origin header values
// (none when empty) and Host, and returns the response and its body.
func originRequest(t *testing.T, method, endpoint, host string, origins ...string) (*http.Response, []byte) {
	t.Helper()
	opts := []sendOption{withMethod(method), withHost(host)}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if method != http.MethodPost {
		body = ""
		opts = append(opts, withoutHeader("Content-Type"))
	}
	for _, o := range origins {
		opts = append(opts, withHeader("Origin", o))
	}
	return post(t, endpoint, body, opts...)
}

// originGateway starts a gateway with the given mcp directive in front of a
// recording upstream. Its site answers every Host, so that a rebinding
// request (Host: evil.example.com) reaches the mcp handler.
func originGateway(t *testing.T, mcpDirective string) (*recorder, string) {
	t.Helper()
	rec, upstream := startRecorder(t)
	url := mcptest.StartCatchAllGateway(t, mcpDirective+"\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	return rec, url + mcptest.MCPPath
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.requests)
}

// assertOrigins sends each case with POST, GET and DELETE and checks that it
// is allowed (reaches the upstream) or refused with 403 and a FORBIDDEN
// envelope before reaching it.
func assertOrigins(t *testing.T, rec *recorder, endpoint string, cases []originCase) {
	t.Helper()
	for _, tc := range cases {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				before := rec.count()
				resp, body := originRequest(t, method, endpoint, tc.host, tc.origins...)
				if tc.allowed {
					assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
					assert.Equal(t, before+1, rec.count(), "the upstream is reached")
					if rec.count() > before {
						assert.Equal(t, method, rec.last(t).method)
					}
					return
				}
				assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
				assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				assert.Empty(t, resp.Header.Get("Retry-After"))
				assert.Equal(t, before, rec.count(), "the upstream saw nothing")
				r := decodeReply(t, body)
				assert.Equal(t, "2.0", r.JSONRPC)
				assert.NotContains(t, r.Members, "id", "the refusal has no id: %s", body)
				assert.NotContains(t, r.Members, "result")
				require.NotNil(t, r.Error, "%s", body)
				assertRPCErrorCarries(t, r, wantEnvelope{code: envelope.Forbidden, recovery: "allowed_origins"})
			})
		}
	}
}

type originCase struct {
	name    string
	origins []string
	// host is the Host header; "" keeps the gateway's address.
	host    string
	allowed bool
}

func TestDefaultOriginPolicyAllowsLoopbackAndRefusesOthers(t *testing.T) {
	rec, endpoint := originGateway(t, "mcp")
	assertOrigins(t, rec, endpoint, []originCase{
		{name: "no Origin", allowed: true},
		{name: "MCP Inspector on localhost", origins: []string{"http://localhost:6274"}, allowed: true},
		{name: "127.0.0.1", origins: []string{"http://127.0.0.1:3000"}, allowed: true},
		{name: "IPv6 loopback", origins: []string{"http://[::1]:3000"}, allowed: true},
		{name: "a .localhost subdomain", origins: []string{"http://app.localhost:5173"}, allowed: true},
		{name: "DNS rebinding: evil Origin and Host", origins: []string{"http://evil.example.com"}, host: "evil.example.com"},
		{name: "evil Origin, loopback Host", origins: []string{"http://evil.example.com"}},
		{name: "a name ending in localhost", origins: []string{"http://evillocalhost:6274"}},
		{name: "two Origin headers", origins: []string{"http://localhost:6274", "http://localhost:6274"}},
		{name: "opaque origin null", origins: []string{"null"}},
		{name: "no scheme", origins: []string{"localhost:6274"}},
		{name: "a path", origins: []string{"http://localhost:6274/inspector"}},
		{name: "not http", origins: []string{"file://localhost"}},
		{name: "garbage", origins: []string{"http://local host:6274"}},
	})
}

func TestAllowedOriginsAllowsExactlyThatOrigin(t *testing.T) {
	rec, endpoint := originGateway(t, "mcp {\n\tallowed_origins https://app.example.com\n}")
	assertOrigins(t, rec, endpoint, []originCase{
		{name: "no Origin", allowed: true},
		{name: "the listed origin", origins: []string{"https://app.example.com"}, host: "app.example.com", allowed: true},
		{name: "host in another case", origins: []string{"https://APP.Example.COM"}, allowed: true},
		{name: "default port written out", origins: []string{"https://app.example.com:443"}, allowed: true},
		{name: "another scheme", origins: []string{"http://app.example.com"}},
		{name: "another port", origins: []string{"https://app.example.com:8443"}},
		{name: "a subdomain", origins: []string{"https://x.app.example.com"}},
		{name: "localhost is no longer implied", origins: []string{"http://localhost:6274"}},
		{name: "two Origin headers", origins: []string{"https://app.example.com", "https://app.example.com"}},
	})
}

func TestAllowedOriginsStarAllowsEveryOrigin(t *testing.T) {
	rec, endpoint := originGateway(t, "mcp {\n\tallowed_origins *\n}")
	assertOrigins(t, rec, endpoint, []originCase{
		{name: "no Origin", allowed: true},
		{name: "evil Origin and Host", origins: []string{"http://evil.example.com"}, host: "evil.example.com", allowed: true},
		{name: "localhost", origins: []string{"http://localhost:6274"}, allowed: true},
		{name: "two Origin headers", origins: []string{"http://a.example", "http://b.example"}},
	})
}
