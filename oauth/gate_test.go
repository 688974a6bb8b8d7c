package oauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

func gateFor(t *testing.T, cfg *Config) (*Gate, *testIssuer, map[string]any) {
	g, is, claims, _ := gateWithClock(t, cfg)
	return g, is, claims
}

func gateWithClock(t *testing.T, cfg *Config) (*Gate, *testIssuer, map[string]any, *clock) {
	is, _, c, claims := setup(t)
	cfg.Issuers = []IssuerConfig{{URL: is.srv.URL}}
	require.NoError(t, cfg.Validate())
	canonical, err := cfg.CanonicalURL(resource, nil)
	require.NoError(t, err)
	g := New(cfg, canonical, zap.NewNop(), c.Now)
	g.verifier = NewVerifier([]Issuer{{URL: is.srv.URL}}, cfg.leeway(), is.srv.Client(), c.Now, nil)
	return g, is, claims, c
}

func exchange(authorization ...string) *feature.Exchange {
	r := httptest.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", nil)
	for _, a := range authorization {
		r.Header.Add("Authorization", a)
	}
	return &feature.Exchange{Request: r, Path: "/mcp"}
}

func TestTheGateAnswersEachKindOfCredentialAsRFC6750Says(t *testing.T) {
	g, is, claims := gateFor(t, &Config{Scopes: []string{"tools:call"}})
	claims["scope"] = "tools:read"
	token := is.sign(t, "k1", claims)
	const meta = `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="tools:call"`
	for _, c := range []struct {
		name      string
		headers   []string
		status    int
		challenge string
		code      envelope.Code
	}{
		{"none", nil, 401, meta, envelope.AuthRequired},
		{"another scheme", []string{"Basic YTpi"}, 401, meta, envelope.AuthRequired},
		{"twice", []string{"Bearer " + token, "Bearer " + token}, 400, meta + `, error="invalid_request", error_description="several Authorization headers"`, envelope.Unauthorized},
		{"empty", []string{"Bearer "}, 401, meta + `, error="invalid_token", error_description="the token is not an access token this resource accepts"`, envelope.Unauthorized},
		{"not a JWT", []string{"Bearer abc"}, 401, meta + `, error="invalid_token", error_description="the token is not an access token this resource accepts"`, envelope.Unauthorized},
		{"lacking the scope", []string{"bearer  " + token}, 403, meta + `, error="insufficient_scope", error_description="the token lacks a required scope"`, envelope.Forbidden},
	} {
		x := exchange(c.headers...)
		u, ref := g.Admit(x)
		assert.Nil(t, u, c.name)
		require.NotNil(t, ref, c.name)
		assert.Equal(t, c.status, ref.Status, c.name)
		assert.Equal(t, c.challenge, ref.Header.Get("WWW-Authenticate"), c.name)
		assert.Equal(t, c.code, ref.Envelope.Code, c.name)
		assert.Nil(t, x.Principal, c.name)
	}

	claims["scope"] = "tools:read tools:call"
	x := exchange("Bearer " + is.sign(t, "k1", claims))
	_, ref := g.Admit(x)
	require.Nil(t, ref)
	require.NotNil(t, x.Principal)
	v, ok := x.Value("auth.subject", nil)
	assert.True(t, ok)
	assert.Equal(t, "user-1", v)
	v, _ = x.Value("auth.claim.client_id", nil)
	assert.Equal(t, "agent-7", v)
	v, _ = x.Value("auth.claim.aud", nil)
	assert.Equal(t, resource, v)
	v, ok = x.Value("auth.claim.absent", nil)
	assert.True(t, ok)
	assert.Empty(t, v)
	assert.NotEmpty(t, x.Request.Header.Get("Authorization"), "the token goes on unless strip_token")
}

func TestStripTokenTakesTheTokenOffTheRequest(t *testing.T) {
	g, is, claims := gateFor(t, &Config{StripToken: true})
	x := exchange("Bearer " + is.sign(t, "k1", claims))
	_, ref := g.Admit(x)
	require.Nil(t, ref)
	assert.Empty(t, x.Request.Header.Values("Authorization"))
}

func TestTheMetadataIsServedAtItsWellKnownPathsOnly(t *testing.T) {
	g, is, _ := gateFor(t, &Config{Scopes: []string{"a", "b"}})
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/other"} {
		w := httptest.NewRecorder()
		require.True(t, g.ServeMetadata(w, httptest.NewRequest(http.MethodGet, "https://MCP.example.com"+path, nil)), path)
		assert.JSONEq(t, `{"resource":"`+resource+`","authorization_servers":["`+is.srv.URL+`"],"scopes_supported":["a","b"],"bearer_methods_supported":["header"]}`, w.Body.String(), "the one resource, wherever asked: %s", path)
		assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	}
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodPost, "/.well-known/oauth-protected-resource", strings.NewReader("{}")),
		httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resourcex", nil),
		httptest.NewRequest(http.MethodGet, "/mcp", nil),
	} {
		assert.False(t, g.ServeMetadata(httptest.NewRecorder(), r), "%s %s", r.Method, r.URL.Path)
	}
}

// What a request says of where it was sent (its Host header, which
// Caddy's host matcher takes whatever its port, and its path) changes
// neither the audience a token is held to, nor the challenge, nor the
// metadata: they are the canonical URL's.
func TestTheResourceIsTheCanonicalURLWhateverTheRequestSays(t *testing.T) {
	g, is, claims := gateFor(t, &Config{})
	const challenge = `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
	claims["aud"] = "https://mcp.example.com:1/other"
	elsewhere := is.sign(t, "k1", claims)
	for _, c := range []struct{ host, path string }{
		{"mcp.example.com:1", "/other"},
		{`evil.example", error="x`, `/mcp", resource_metadata="https://evil.example/x`},
	} {
		x := exchange()
		x.Request.Host, x.Path = c.host, c.path
		_, ref := g.Admit(x)
		require.NotNil(t, ref)
		assert.Equal(t, challenge, ref.Header.Get("WWW-Authenticate"), c.host)

		x = exchange("Bearer " + elsewhere)
		x.Request.Host, x.Path = c.host, c.path
		_, ref = g.Admit(x)
		require.NotNil(t, ref, "a token for %s%s", c.host, c.path)
		assert.Equal(t, http.StatusUnauthorized, ref.Status)
		assert.Contains(t, ref.Header.Get("WWW-Authenticate"), `error="invalid_token"`)

		r := httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource", nil)
		r.Host, r.URL.Path = c.host, r.URL.Path+c.path
		w := httptest.NewRecorder()
		require.True(t, g.ServeMetadata(w, r))
		assert.Contains(t, w.Body.String(), `"resource":"`+resource+`"`)
	}
}

// The canonical URL is the configured resource, or the site's address;
// without either the configuration is refused, saying what to add. What
// would end the challenge's quotes is refused in either.
func TestTheCanonicalURLIsTheResourceOrTheSitesAddress(t *testing.T) {
	cfg := &Config{Issuers: []IssuerConfig{{URL: "https://auth.example.com"}}}
	got, err := cfg.CanonicalURL("https://mcp.example.com", nil)
	require.NoError(t, err)
	assert.Equal(t, "https://mcp.example.com", got)
	_, err = cfg.CanonicalURL("", errors.New("the site answers for any host"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resource is required")
	assert.Contains(t, err.Error(), "the site answers for any host")
	_, err = cfg.CanonicalURL(`http://a"b`, nil)
	assert.Error(t, err)

	cfg.Resource = "https://mcp.example.com/mcp"
	got, err = cfg.CanonicalURL("", errors.New("the site answers for any host"))
	require.NoError(t, err)
	assert.Equal(t, cfg.Resource, got)
	for _, bad := range []string{"/mcp", "urn:mcp", "api://mcp", "https://mcp.example.com/mcp?x=1", "https://mcp.example.com/#x", `https://mcp.example.com/a"b`, "https://mcp.example.com/a b"} {
		cfg.Resource = bad
		assert.Error(t, cfg.Validate(), bad)
	}
}

func TestTheStatusShowsEachIssuersKeysAndTheLastFetchsError(t *testing.T) {
	g, is, claims, c := gateWithClock(t, &Config{Scopes: []string{"a"}})
	s := g.Status()
	assert.Equal(t, []IssuerStatus{{URL: is.srv.URL}}, s.Issuers, "nothing fetched before a token needs it")

	claims["scope"] = "a"
	_, ref := g.Admit(exchange("Bearer " + is.sign(t, "k1", claims)))
	require.Nil(t, ref)
	s = g.Status()
	assert.Equal(t, []IssuerStatus{{URL: is.srv.URL, JWKS: is.srv.URL + "/jwks", Keys: 1, FetchedAgo: "0s"}}, s.Issuers)
	assert.Equal(t, 1, s.Remembered)
	assert.Equal(t, []string{"a"}, s.Scopes)

	is.set(func() { is.down = true })
	c.advance(RefetchAfter)
	_, ref = g.Admit(exchange("Bearer " + is.sign(t, "k-new", claims)))
	require.NotNil(t, ref)
	s = g.Status()
	assert.Equal(t, 1, s.Issuers[0].Keys, "the keys held stay")
	assert.Contains(t, s.Issuers[0].Error, "503")
}

func TestARememberedTokenIsAdmittedWithoutAllocating(t *testing.T) {
	g, is, claims := gateFor(t, &Config{Resource: resource})
	x := exchange("Bearer " + is.sign(t, "k1", claims))
	_, ref := g.Admit(x)
	require.Nil(t, ref)
	first := x.Principal
	allocs := testing.AllocsPerRun(100, func() {
		if _, ref := g.Admit(x); ref != nil {
			t.Fatal(ref.Envelope.Message)
		}
	})
	assert.Zero(t, allocs)
	assert.Same(t, first, x.Principal, "the principal made once, when the token was checked")
}
