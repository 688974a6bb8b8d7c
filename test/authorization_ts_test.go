package test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The official TypeScript SDK's client signs in through the gateway as
// the Go SDK's does (TestTheGoSDKClientSignsInWithClientCredentialsAndCallsTools):
// with its own ClientCredentialsProvider, against the real authorization
// server, from nothing but the gateway's 401.

func TestTheTypeScriptSDKClientSignsInWithClientCredentialsAndCallsTools(t *testing.T) {
	a := startAuthorized(t, "", "")
	out := mcptest.RunTSClient(t, mcptest.TSScript{
		URL:        a.endpoint,
		OAuth:      &mcptest.TSOAuth{ClientID: agent.ID, ClientSecret: agent.Secret, ExpectedIssuer: a.as.Issuer, Scope: agent.Scope},
		RecordHTTP: true,
		Steps: []mcptest.TSStep{
			mcptest.ListToolsStep(),
			mcptest.CallToolStep("echo", map[string]any{"text": "signed in from TypeScript"}),
		},
	})
	require.Len(t, out.Results, 2)
	var list struct{ Tools []struct{ Name string } }
	require.NoError(t, out.Results[0].Decode(&list))
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	assert.Contains(t, names, "echo")
	require.True(t, out.Results[1].OK, "%v", out.Results[1].Error)
	assert.False(t, out.Results[1].CallToolResult(t).IsError)
	assert.Equal(t, "signed in from TypeScript", out.Results[1].Text())

	// Up to the initialize sent again, one step after the other: the
	// request without a token, the metadata its challenge names, the
	// issuer that names, a token there with the client's secret, and the
	// request again with the token. What follows overlaps (the GET stream).
	metadata := a.gw.URL + "/.well-known/oauth-protected-resource"
	require.GreaterOrEqual(t, len(out.HTTP), 5, "%+v", out.HTTP)
	assert.Equal(t, []mcptest.TSExchange{
		{Method: http.MethodPost, URL: a.endpoint, Status: http.StatusUnauthorized},
		{Method: http.MethodGet, URL: metadata, Status: http.StatusOK},
		{Method: http.MethodGet, URL: a.as.Issuer + "/.well-known/oauth-authorization-server", Status: http.StatusOK},
		{Method: http.MethodPost, URL: a.as.Issuer + "/token", Authorization: "Basic", Status: http.StatusOK},
		{Method: http.MethodPost, URL: a.endpoint, Authorization: "Bearer", Status: http.StatusOK},
	}, out.HTTP[:5])
	for _, ex := range out.HTTP[5:] {
		assert.Equal(t, "Bearer", ex.Authorization, "%+v", ex)
		assert.Less(t, ex.Status, 300, "%+v", ex)
	}
	require.NotNil(t, out.Auth)
	assert.Equal(t, mcptest.TSAuth{TokenType: "Bearer", Scope: agent.Scope, ExpiresIn: 3600, Issuer: a.as.Issuer}, *out.Auth)

	// What reached the server came with the token the authorization
	// server issued to the client, for the resource the metadata named:
	// the site's address.
	seen := a.upstreamSaw()
	require.NotEmpty(t, seen)
	for _, h := range seen {
		assert.Equal(t, seen[0], h, "one token throughout")
	}
	claims := claimsOf(t, strings.TrimPrefix(seen[0], "Bearer "))
	assert.Equal(t, agent.ID, claims.Sub)
	assert.Equal(t, a.as.Issuer, claims.Iss)
	assert.Equal(t, a.resource, claims.Aud)
}

// A client whose secret the authorization server refuses does not get
// in, and nothing it sends reaches the server.
func TestTheTypeScriptSDKClientWithAWrongSecretIsKeptOut(t *testing.T) {
	a := startAuthorized(t, "", "")
	out, err := mcptest.TryRunTSClient(t, mcptest.TSScript{
		URL:        a.endpoint,
		OAuth:      &mcptest.TSOAuth{ClientID: agent.ID, ClientSecret: "not-the-secret-of-agent", ExpectedIssuer: a.as.Issuer},
		RecordHTTP: true,
	})
	require.ErrorIs(t, err, mcptest.ErrTSConnect)
	assert.Equal(t, "InvalidClientError", out.ConnectError.Type, "the authorization server's invalid_client")
	assert.Nil(t, out.Auth, "no token")
	var refused int
	for _, ex := range out.HTTP {
		switch ex.URL {
		case a.endpoint:
			assert.Equal(t, http.StatusUnauthorized, ex.Status, "%+v", ex)
		case a.as.Issuer + "/token":
			assert.Equal(t, http.StatusUnauthorized, ex.Status, "%+v", ex)
			refused++
		}
	}
	assert.Positive(t, refused, "the token endpoint refused it: %+v", out.HTTP)
	assert.Empty(t, a.upstreamSaw())
}

// jwtClaims are the claims of an access token this test reads.
type jwtClaims struct {
	Sub string `json:"sub"`
	Iss string `json:"iss"`
	Aud string `json:"aud"`
}

// claimsOf reads the claims of a JWT without verifying it: the gateway
// did, before the server saw it.
func claimsOf(t *testing.T, token string) jwtClaims {
	t.Helper()
	var c jwtClaims
	require.NoError(t, mcptest.Claims(token, &c))
	return c
}

// A tool needs a scope the client's authorization server never grants it
// (client credentials have fixed scopes). The TypeScript SDK client steps
// up once on the gateway's 403 insufficient_scope, comes back with a new
// token that still lacks the scope, and would throw "Server returned 403
// after trying upscoping", a transport error the model never reads: the
// gateway answers the second refusal with the FORBIDDEN envelope as the
// call's result instead.
func TestAStepUpTheTypeScriptClientCannotTakeReachesTheModel(t *testing.T) {
	a := startAuthorized(t, "\t\ttool echo tools:admin", "")
	out := mcptest.RunTSClient(t, mcptest.TSScript{
		URL:        a.endpoint,
		OAuth:      &mcptest.TSOAuth{ClientID: agent.ID, ClientSecret: agent.Secret, ExpectedIssuer: a.as.Issuer, Scope: agent.Scope},
		RecordHTTP: true,
		Steps:      []mcptest.TSStep{mcptest.CallToolStep("echo", map[string]any{"text": "x"})},
	})
	require.Len(t, out.Results, 1)
	r := out.Results[0]
	require.True(t, r.OK, "the refusal is a result: %v", r.Error)
	res := r.CallToolResult(t)
	assert.True(t, res.IsError)
	assert.Equal(t, "FORBIDDEN", resultCode(r.Text()))
	assert.Contains(t, r.Text(), "tools:admin", "the model reads which scope to ask the user for")
	var forbidden int
	for _, ex := range out.HTTP {
		if ex.Status == http.StatusForbidden {
			forbidden++
		}
	}
	assert.Equal(t, 1, forbidden, "one step-up challenge, which the client took: %+v", out.HTTP)
}
