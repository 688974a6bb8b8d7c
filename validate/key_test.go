package validate

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// With authorization, a caller's list is its verified principal's: a
// renewed token keeps it, a stripped one does not make the caller
// anonymous, and two principals never share one.
func TestAListIsThePrincipalsWhenOneWasVerified(t *testing.T) {
	f := newFeature(t, Config{})
	with := func(token string, p *feature.Principal) *feature.Exchange {
		x := featuretest.Post(t, listRequest)
		if token != "" {
			x.Request.Header.Set("Authorization", "Bearer "+token)
		}
		x.Principal = p
		return x
	}
	alice := &feature.Principal{Issuer: "https://as", Subject: "alice", ClientID: "app", Scopes: []string{"a"}}
	bob := &feature.Principal{Issuer: "https://as", Subject: "bob", ClientID: "app", Scopes: []string{"a"}}
	aliceElsewhere := &feature.Principal{Issuer: "https://other-as", Subject: "alice", ClientID: "app", Scopes: []string{"a"}}
	aliceMore := &feature.Principal{Issuer: "https://as", Subject: "alice", ClientID: "app", Scopes: []string{"a", "b"}}

	first := f.KeyOf(with("token-1", alice))
	assert.Equal(t, first, f.KeyOf(with("token-2", alice)), "a renewed token")
	assert.Equal(t, first, f.KeyOf(with("", alice)), "a stripped token")
	for name, p := range map[string]*feature.Principal{"another subject": bob, "another issuer": aliceElsewhere, "other scopes": aliceMore} {
		assert.NotEqual(t, first, f.KeyOf(with("token-1", p)), name)
	}
	assert.NotEqual(t, f.KeyOf(with("", nil)), f.KeyOf(with("", alice)), "never anonymous")
	assert.Equal(t, "anonymous", f.KeyOf(with("", nil)).Scope)
	assert.NotEqual(t, f.KeyOf(with("token-1", nil)), f.KeyOf(with("token-2", nil)), "without authorization, by the header")
}
