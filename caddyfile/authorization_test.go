package caddyfile

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/handler"
	"github.com/caddymcp/caddy-mcp/oauth"
)

func TestUnmarshalReadsTheAuthorizationBlock(t *testing.T) {
	input := `mcp {
	authorization {
		issuer https://auth.example.com
		issuer https://login.example.org/tenant jwks https://login.example.org/tenant/keys
		issuer https://opaque.example.com {
			jwks https://opaque.example.com/keys
			introspect mcp-gateway {env.INTROSPECTION_SECRET} https://opaque.example.com/introspect
		}
		resource https://mcp.example.com/mcp
		scopes mcp:tools mcp:read
		leeway 1m
		strip_token
		tool delete_* repo:admin
		tool * repo:read
		prompt review repo:read
		uri file:///secret/* files:secret
	}
}`
	var h handler.Handler
	require.NoError(t, Unmarshal(caddyfile.NewTestDispenser(input), &h))
	assert.Equal(t, oauth.Config{
		Issuers: []oauth.IssuerConfig{
			{URL: "https://auth.example.com"},
			{URL: "https://login.example.org/tenant", JWKS: "https://login.example.org/tenant/keys"},
			{URL: "https://opaque.example.com", JWKS: "https://opaque.example.com/keys", Introspection: &oauth.IntrospectionConfig{
				ClientID: "mcp-gateway", ClientSecret: "{env.INTROSPECTION_SECRET}", Endpoint: "https://opaque.example.com/introspect",
			}},
		},
		Resource:   "https://mcp.example.com/mcp",
		Scopes:     []string{"mcp:tools", "mcp:read"},
		Leeway:     caddy.Duration(time.Minute),
		StripToken: true,
		ToolScopes: []oauth.ScopeRule{
			{Match: "delete_*", Scopes: []string{"repo:admin"}},
			{Match: "*", Scopes: []string{"repo:read"}},
		},
		PromptScopes:   []oauth.ScopeRule{{Match: "review", Scopes: []string{"repo:read"}}},
		ResourceScopes: []oauth.ScopeRule{{Match: "file:///secret/*", Scopes: []string{"files:secret"}}},
	}, authorizationOf(t, &h))
}

func TestUnmarshalRefusesABadAuthorizationBlockAtItsLine(t *testing.T) {
	for input, want := range map[string]string{
		"mcp {\n\tauthorization {\n\t\tscopes a\n\t}\n}":                                                                                                               "authorization: at least one issuer is required, at Testfile:2",
		"mcp {\n\tauthorization {\n\t\tissuer http://auth.example.com\n\t}\n}":                                                                                         `authorization: issuer "http://auth.example.com": https is required (http only to a loopback address), at Testfile:2`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example jwks\n\t}\n}":                                                                                          `issuer takes <url> [jwks <url>], got ["https://a.example" "jwks"], at Testfile:3`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example {\n\t\t\tintrospect id\n\t\t}\n\t}\n}":                                                                 `introspect takes <client_id> <client_secret> [<endpoint>], got 1 values, at Testfile:4`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example {\n\t\t\tintrospect id s\n\t\t}\n\t\tissuer https://b.example {\n\t\t\tintrospect id s\n\t\t}\n\t}\n}": `one issuer at most introspects opaque tokens`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example {\n\t\t\tintrospect id s http://b.example/i\n\t\t}\n\t}\n}":                                            `endpoint "http://b.example/i": https is required`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example {\n\t\t\tinstrospect id s\n\t\t}\n\t}\n}":                                                              `unrecognized issuer subdirective "instrospect": did you mean "introspect"?`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example\n\t\tscope a\n\t}\n}":                                                                                  `unrecognized authorization subdirective "scope": did you mean "scopes"?, at Testfile:4`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example\n\t\tleeway 1h\n\t}\n}":                                                                                "authorization: leeway 1h0m0s: between 0 and 5m0s, at Testfile:2",
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example\n\t\tscopes a\"b\n\t}\n}":                                                                              `authorization: scope "a\"b": a scope is printable ASCII`,
		"mcp {\n\tauthorization {\n\t\tissuer https://a.example\n\t\tresource /mcp\n\t}\n}":                                                                            `authorization: resource "/mcp": an absolute http or https URL without query or fragment is required, at Testfile:2`,
	} {
		err := Unmarshal(caddyfile.NewTestDispenser(input), &handler.Handler{})
		require.Error(t, err, input)
		assert.Contains(t, err.Error(), want, input)
		assert.True(t, strings.Contains(err.Error(), "Testfile:"), fmt.Sprint(err))
	}
}

// authorizationOf is the authorization h's features configure.
func authorizationOf(t *testing.T, h *handler.Handler) oauth.Config {
	t.Helper()
	var f oauth.Feature
	require.NoError(t, json.Unmarshal(h.FeaturesRaw["authorization"], &f))
	return f.Config
}
