package mcptest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

const (
	gatewayResource = "https://gateway.test/mcp"
	resourceA       = "https://a.test/mcp"
	resourceB       = "https://b.test/mcp"
)

var (
	app         = mcptest.AuthClient{ID: "app", Secret: "app-secret-app-secret-app-secret", Scope: "tools:call"}
	basicClient = mcptest.AuthClient{ID: "gw-basic", Secret: "basic-secret-basic-secret-basic", GrantTypes: []string{mcptest.TokenExchangeGrant}}
	postClient  = mcptest.AuthClient{ID: "gw-post", Secret: "post-secret-post-secret-post-sec", GrantTypes: []string{mcptest.TokenExchangeGrant}, AuthMethod: "client_secret_post"}
)

// exchanger is a client that exchanges tokens at as, authenticating as
// its auth method says.
type exchanger struct {
	as     *mcptest.AuthServer
	client mcptest.AuthClient
	key    *ecdsa.PrivateKey // private_key_jwt's
}

// answer is the token endpoint's answer: its status and JSON body.
type answer struct {
	status int
	body   map[string]any
}

// exchange sends a token exchange request with form.
func (e exchanger) exchange(t *testing.T, form url.Values) answer {
	t.Helper()
	form.Set("grant_type", mcptest.TokenExchangeGrant)
	switch e.client.AuthMethod {
	case "client_secret_post":
		form.Set("client_id", e.client.ID)
		form.Set("client_secret", e.client.Secret)
	case "private_key_jwt":
		form.Set("client_id", e.client.ID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", e.assertion(t))
	}
	req, err := http.NewRequest(http.MethodPost, e.as.TokenEndpoint(), strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if e.client.AuthMethod == "" {
		req.SetBasicAuth(e.client.ID, e.client.Secret)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a.body))
	return a
}

// assertion is a client assertion (RFC 7523) signed with e's key.
func (e exchanger) assertion(t *testing.T) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: e.key, KeyID: "c1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	require.NoError(t, err)
	now := time.Now()
	token, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: e.client.ID, Subject: e.client.ID, Audience: jwt.Audience{e.as.TokenEndpoint()},
		ID: rand.Text(), IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
	require.NoError(t, err)
	return token
}

// exchangeFor is the form of an exchange of subject for target (as a
// resource indicator) with scope ("" for the resource's).
func exchangeFor(subject, target, scope string) url.Values {
	form := url.Values{"subject_token": {subject}, "subject_token_type": {mcptest.AccessTokenType}, "resource": {target}}
	if scope != "" {
		form.Set("scope", scope)
	}
	return form
}

// claimsOf is the payload of a JWT, unverified.
func claimsOf(t *testing.T, token string) map[string]any {
	t.Helper()
	var claims map[string]any
	require.NoError(t, mcptest.Claims(token, &claims))
	return claims
}

// issued checks an exchange's answer, and is the claims of its token.
func issued(t *testing.T, a answer) map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, a.status, "%v", a.body)
	assert.Equal(t, mcptest.AccessTokenType, a.body["issued_token_type"])
	assert.Equal(t, "Bearer", a.body["token_type"])
	assert.Positive(t, a.body["expires_in"])
	token, _ := a.body["access_token"].(string)
	return claimsOf(t, token)
}

func startExchanging(t *testing.T, exchange mcptest.AuthExchange, clients ...mcptest.AuthClient) *mcptest.AuthServer {
	t.Helper()
	as := mcptest.NewAuthServer(t)
	as.Start(t, mcptest.AuthServerConfig{
		Clients: append([]mcptest.AuthClient{app, basicClient, postClient}, clients...),
		Resources: map[string]mcptest.AuthResource{
			gatewayResource: {Scope: "tools:call tools:read"},
			resourceA:       {Scope: "a:read a:write", TTL: 60},
			resourceB:       {Scope: "b:read"},
		},
		DefaultResource: gatewayResource,
		Exchange:        &exchange,
	}, "k1")
	return as
}

func TestAuthServerExchangesAUsersTokenForEachResource(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	jwtClient := mcptest.AuthClient{ID: "gw-jwt", GrantTypes: []string{mcptest.TokenExchangeGrant}, AuthMethod: "private_key_jwt",
		JWKS: &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "c1", Algorithm: string(jose.ES256), Use: "sig"}}}}
	as := startExchanging(t, mcptest.AuthExchange{Accept: gatewayResource}, jwtClient)
	alice := as.UserToken(t, "alice", app.ID, "tools:call", gatewayResource)
	claims := claimsOf(t, alice)
	assert.Equal(t, "alice", claims["sub"])
	assert.Equal(t, gatewayResource, claims["aud"])
	assert.Equal(t, app.ID, claims["client_id"])
	assert.Equal(t, "tools:call", claims["scope"])
	assert.Nil(t, claims["act"])

	basic := exchanger{as: as, client: basicClient}
	a := issued(t, basic.exchange(t, exchangeFor(alice, resourceA, "a:read")))
	assert.Equal(t, map[string]any{"sub": "alice", "aud": resourceA, "client_id": basicClient.ID, "scope": "a:read", "act": map[string]any{"sub": basicClient.ID}},
		map[string]any{"sub": a["sub"], "aud": a["aud"], "client_id": a["client_id"], "scope": a["scope"], "act": a["act"]})
	assert.Equal(t, float64(60), a["exp"].(float64)-a["iat"].(float64), "the resource's ttl")
	// The audience parameter names the target too; the scope is the
	// resource's by default.
	b := issued(t, basic.exchange(t, url.Values{"subject_token": {alice}, "subject_token_type": {mcptest.AccessTokenType}, "audience": {resourceB}}))
	assert.Equal(t, []any{resourceB, "alice", "b:read", basicClient.ID}, []any{b["aud"], b["sub"], b["scope"], b["act"].(map[string]any)["sub"]})

	for _, e := range []exchanger{{as: as, client: postClient}, {as: as, client: jwtClient, key: key}} {
		c := issued(t, e.exchange(t, exchangeFor(alice, resourceA, "")))
		assert.Equal(t, []any{resourceA, "alice", "a:read a:write", e.client.ID, e.client.ID}, []any{c["aud"], c["sub"], c["scope"], c["client_id"], c["act"].(map[string]any)["sub"]})
	}

	// A token exchanged for the gateway's own resource, exchanged again:
	// the earlier actor is nested in the new one's act (RFC 8693 §4.1).
	first := basic.exchange(t, exchangeFor(alice, gatewayResource, ""))
	issued(t, first)
	nested := issued(t, exchanger{as: as, client: postClient}.exchange(t, exchangeFor(first.body["access_token"].(string), resourceB, "")))
	assert.Equal(t, map[string]any{"sub": postClient.ID, "act": map[string]any{"sub": basicClient.ID}}, nested["act"])

	stats := as.Stats(t)
	assert.Equal(t, mcptest.AuthStats{TokenRequests: 6, Exchanges: 6, BySubject: map[string]int{"alice": 6}}, stats)
}

func TestAuthServerRefusesExchangesAsTheProviderWritesErrors(t *testing.T) {
	as := startExchanging(t, mcptest.AuthExchange{Accept: gatewayResource, Deny: map[string][]string{"mallory": {resourceB}}})
	basic := exchanger{as: as, client: basicClient}
	mallory := as.UserToken(t, "mallory", app.ID, "", gatewayResource)
	elsewhere := as.UserToken(t, "alice", app.ID, "", resourceA)
	stranger := mcptest.NewAuthServer(t)
	stranger.Start(t, mcptest.AuthServerConfig{Clients: []mcptest.AuthClient{app}, Resources: map[string]mcptest.AuthResource{gatewayResource: {Scope: "tools:call"}}}, "k1")
	foreign := stranger.UserToken(t, "alice", app.ID, "", gatewayResource)
	for _, c := range []struct {
		name string
		e    exchanger
		form url.Values
		want map[string]any
	}{
		{"no consent", basic, exchangeFor(mallory, resourceB, ""),
			map[string]any{"error": "access_denied", "error_description": "the user has not consented to " + resourceB}},
		{"another audience", basic, exchangeFor(elsewhere, resourceB, ""),
			map[string]any{"error": "invalid_grant", "error_description": "grant request is invalid"}},
		{"another issuer", basic, exchangeFor(foreign, resourceB, ""),
			map[string]any{"error": "invalid_grant", "error_description": "grant request is invalid"}},
		{"unknown target", basic, exchangeFor(mallory, "https://unknown.test/mcp", ""),
			map[string]any{"error": "invalid_target", "error_description": "resource indicator is missing, or unknown"}},
		{"no target", basic, url.Values{"subject_token": {mallory}, "subject_token_type": {mcptest.AccessTokenType}},
			map[string]any{"error": "invalid_target", "error_description": "resource indicator is missing, or unknown"}},
		{"scope beyond the resource's", basic, exchangeFor(mallory, resourceA, "a:read tools:call"),
			map[string]any{"error": "invalid_scope", "error_description": "requested scope is not allowed", "scope": "tools:call"}},
		{"no subject token type", basic, url.Values{"subject_token": {mallory}, "resource": {resourceA}},
			map[string]any{"error": "invalid_request", "error_description": "missing required parameter 'subject_token_type'"}},
		{"another subject token type", basic, url.Values{"subject_token": {mallory}, "subject_token_type": {"urn:ietf:params:oauth:token-type:id_token"}, "resource": {resourceA}},
			map[string]any{"error": "invalid_request", "error_description": "unsupported subject_token_type"}},
		{"a client not allowed to exchange", exchanger{as: as, client: app}, exchangeFor(mallory, resourceA, ""),
			map[string]any{"error": "invalid_request", "error_description": "requested grant type is not allowed for this client"}},
	} {
		got := c.e.exchange(t, c.form)
		assert.Equal(t, http.StatusBadRequest, got.status, c.name)
		assert.Equal(t, c.want, got.body, c.name)
	}
	// Mallory has consented to A.
	assert.Equal(t, resourceA, issued(t, basic.exchange(t, exchangeFor(mallory, resourceA, "")))["aud"])
	assert.Equal(t, mcptest.AuthStats{TokenRequests: 10, Exchanges: 1, BySubject: map[string]int{"mallory": 1}}, as.Stats(t))
}

func TestAuthServerUnchangedAnswersTheSubjectToken(t *testing.T) {
	as := startExchanging(t, mcptest.AuthExchange{Accept: gatewayResource, Unchanged: true})
	alice := as.UserToken(t, "alice", app.ID, "tools:call", gatewayResource)
	got := exchanger{as: as, client: basicClient}.exchange(t, exchangeFor(alice, resourceA, ""))
	claims := issued(t, got)
	assert.Equal(t, alice, got.body["access_token"])
	assert.Equal(t, gatewayResource, claims["aud"])
	assert.Equal(t, mcptest.AuthStats{TokenRequests: 1, Exchanges: 1, BySubject: map[string]int{"alice": 1}}, as.Stats(t))

	// The token endpoint is the one the server's metadata names.
	resp, err := http.Get(as.Issuer + "/.well-known/openid-configuration")
	require.NoError(t, err)
	defer resp.Body.Close()
	var metadata struct {
		TokenEndpoint string   `json:"token_endpoint"`
		GrantTypes    []string `json:"grant_types_supported"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&metadata))
	assert.Equal(t, as.TokenEndpoint(), metadata.TokenEndpoint)
	assert.Contains(t, metadata.GrantTypes, mcptest.TokenExchangeGrant)
}

// A config without the new fields is written as before.
func TestAuthClientWithoutExchangeIsWrittenAsBefore(t *testing.T) {
	written, err := json.Marshal(mcptest.AuthServerConfig{Clients: []mcptest.AuthClient{{ID: "a", Secret: "s", Scope: "x"}}, Resources: map[string]mcptest.AuthResource{"r": {Scope: "x"}}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"clients":[{"client_id":"a","client_secret":"s","scope":"x"}],"resources":{"r":{"scope":"x"}}}`, string(written))
}
