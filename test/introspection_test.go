package test

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Opaque access tokens, which the gateway checks at the authorization
// server's introspection endpoint (RFC 7662) with its own client
// credentials: the real server decides whether each is active, and for
// which resource.

func TestTheGoSDKClientSignsInWithAnOpaqueTokenTheGatewayIntrospects(t *testing.T) {
	a := startAuthorizedFor(t, "", "", mcptest.AuthResource{Opaque: true})
	cs := signIn(t, a.endpoint, agent)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "opaque"}})
	require.NoError(t, err)
	assert.Equal(t, "opaque", mcptest.TextOf(t, res))
	seen := a.upstreamSaw()
	require.NotEmpty(t, seen)
	assert.NotContains(t, seen[0], ".", "an opaque token, not a JWT")
}

func TestOpaqueTokensTheServerMustNotAcceptAreRefused(t *testing.T) {
	a := startAuthorizedFor(t, "", "", mcptest.AuthResource{Opaque: true})
	good := a.as.Token(t, agent, "", "")
	elsewhere := a.as.Token(t, agent, "https://elsewhere.test/mcp", "")

	for name, c := range map[string]struct {
		token  string
		reason string
	}{
		"unknown to the issuer":  {"made-up-token-of-the-right-shape-1234567890", "the authorization server says the token is not active (revoked, expired or unknown)"},
		"for another resource":   {elsewhere, "the token was issued for another resource"},
		"not a bearer token":     {"two words", "the token is not an access token this resource accepts"},
		"tampered (a character)": {tampered(good), "the authorization server says the token is not active (revoked, expired or unknown)"},
	} {
		resp, body := post(t, a.endpoint, initialize, bearerOf(c.token))
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", name, body)
		ch := challengeOf(t, resp)
		assert.Equal(t, "invalid_token", ch["error"], name)
		assert.Equal(t, c.reason, ch["error_description"], name)
	}
	assert.Empty(t, a.upstreamSaw(), "nothing reached the server")

	resp, _ := post(t, a.endpoint, initialize, bearerOf(good))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// tampered is token with its last character changed: to another, always.
func tampered(token string) string {
	c := byte('x')
	if token[len(token)-1] == c {
		c = 'y'
	}
	return token[:len(token)-1] + string(c)
}
