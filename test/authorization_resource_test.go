package test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The canonical URL, the audience every token must be issued for, comes
// from the configuration (the site's address, or resource), never from
// what a client sends: Caddy's host matcher takes a Host header whatever
// its port, and a site answers at any path.

// metadataResource is the resource the Protected Resource Metadata at
// base names, asked for with opts.
func metadataResource(t *testing.T, base string, opts ...sendOption) string {
	t.Helper()
	resp, body := post(t, base+"/.well-known/oauth-protected-resource", "", append(opts, withMethod(http.MethodGet))...)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var meta struct {
		Resource string `json:"resource"`
	}
	require.NoError(t, json.Unmarshal(body, &meta), "%s", body)
	return meta.Resource
}

func TestATokenForAnotherPortOrPathOfTheSiteIsRefused(t *testing.T) {
	a := startAuthorized(t, "", "")
	_, port, err := net.SplitHostPort(strings.TrimPrefix(a.gw.URL, "http://"))
	require.NoError(t, err)
	for _, c := range []struct {
		name, resource, path, host string
	}{
		{"another port, named in the Host header", "http://127.0.0.1:1/mcp", "/mcp", "127.0.0.1:1"},
		{"another path, asked for", a.gw.URL + "/other", "/other", ""},
		{"another path, the endpoint's", a.endpoint, "/mcp", ""},
	} {
		token := a.as.Token(t, agent, c.resource, "")
		require.Equal(t, c.resource, claimsOf(t, token).Aud)
		resp, body := post(t, a.gw.URL+c.path, initialize, bearerOf(token), withHost(c.host))
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", c.name, body)
		ch := challengeOf(t, resp)
		assert.Equal(t, "invalid_token", ch["error"], c.name)
		assert.Equal(t, a.gw.URL+"/.well-known/oauth-protected-resource", ch["resource_metadata"], "%s: the site's own metadata", c.name)
		assert.Contains(t, string(body), `reason\">wrong_audience`, c.name)
	}
	assert.Empty(t, a.upstreamSaw())

	assert.Equal(t, "http://127.0.0.1:"+port, a.resource)
	assert.Equal(t, a.resource, metadataResource(t, a.gw.URL, withHost("127.0.0.1:1")), "whatever the Host header")
	resp, body := post(t, a.endpoint, initialize, bearerOf(a.as.Token(t, agent, a.resource, "")), withHost("127.0.0.1:1"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a token for the site's address: %s", body)
}

// The site's address gives the scheme too: https where the server serves
// TLS; and a handler in a route block within the site has its address.
func TestTheCanonicalURLIsTheAddressOfEachSite(t *testing.T) {
	const mcp = "mcp {\n\tauthorization {\n\t\tissuer http://127.0.0.1:1\n\t}\n}"
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{HTTPS: true, Site: mcp + "\nreverse_proxy " + startUpstream(t).addr})
	assert.Equal(t, g.URL, metadataResource(t, g.URL))
	assert.Equal(t, g.HTTPSURL, metadataResource(t, g.HTTPSURL, withClient(g.HTTPSClient(t))))

	g.Reload(t, "route {\n\t"+strings.ReplaceAll(mcp, "\n", "\n\t")+"\n\trespond ok\n}")
	assert.Equal(t, g.URL, metadataResource(t, g.URL, afterReload(t)))
}

// A site whose address names no single origin (any host, several, a
// wildcard) cannot give the canonical URL: the config is refused, saying
// to give resource; with resource, it loads.
func TestAnAuthorizationWithoutResourceOnASiteOfManyHostsIsRefusedAtLoad(t *testing.T) {
	const authorization = "mcp {\n\tauthorization {\n\t\tissuer http://127.0.0.1:1\n%s\t}\n}\nrespond ok"
	port := func() string {
		_, p, err := net.SplitHostPort(mcptest.FreeLoopbackAddr(t))
		require.NoError(t, err)
		return p
	}
	load := caddyLoader(t)
	for _, c := range []struct{ address, why string }{
		{"http://:%s", "the site answers for any host"},
		{"http://127.0.0.1:%[1]s, http://localhost:%[1]s", "the site answers for 2 hosts (127.0.0.1, localhost)"},
		{"http://*.mcp.test:%s", "the site answers for the hosts *.mcp.test"},
	} {
		address := fmt.Sprintf(c.address, port())
		cfg := mcptest.Caddyfile{Storage: t.TempDir(), DefaultBind: "127.0.0.1", Sites: []mcptest.Site{{Address: address, Body: fmt.Sprintf(authorization, "")}}}
		err := loadCaddyfile(t, load, cfg.String())
		require.Error(t, err, address)
		t.Logf("%s: %v", address, err)
		assert.Contains(t, err.Error(), "provision http.handlers.mcp: authorization: resource is required", address)
		assert.Contains(t, err.Error(), c.why, address)

		cfg.Sites[0].Body = fmt.Sprintf(authorization, "\t\tresource https://mcp.example.com/mcp\n")
		assert.NoError(t, loadCaddyfile(t, load, cfg.String()), "%s, with resource", address)
	}
}
