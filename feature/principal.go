package feature

import (
	"slices"
	"strings"
)

// Principal is who a verified credential speaks for, written on the
// exchange by the identity phase (package oauth) before any other feature
// runs, so that keys, session bindings and per-caller state rest on it
// rather than on a header nobody checked. Nil when the gateway verifies no
// credential.
type Principal struct {
	// Issuer is who issued the token; Subject is its "sub"; ClientID the
	// client it was issued to.
	Issuer, Subject, ClientID string
	// Scopes are the scopes the token grants.
	Scopes []string
	// Claim returns one of the token's claims as text: a string as it is,
	// anything else as its JSON; ok is false when the token has none.
	Claim func(name string) (string, bool)
}

// HasScopes reports whether p grants every scope of want.
func (p *Principal) HasScopes(want []string) bool {
	for _, w := range want {
		if !slices.Contains(p.Scopes, w) {
			return false
		}
	}
	return true
}

// The {http.mcp.auth.*} placeholders: the verified principal's issuer,
// subject, client, scopes (separated by spaces), and any claim.
const (
	AuthIssuer      = "auth.issuer"
	AuthSubject     = "auth.subject"
	AuthClientID    = "auth.client_id"
	AuthScopes      = "auth.scopes"
	AuthClaimPrefix = "auth.claim."
)

// principalValue is the {http.mcp.auth.*} placeholder name of x, "" for
// all when no principal was verified.
func (x *Exchange) principalValue(name string) (v string, ok bool) {
	claim, isClaim := strings.CutPrefix(name, AuthClaimPrefix)
	if name != AuthIssuer && name != AuthSubject && name != AuthClientID && name != AuthScopes && (!isClaim || claim == "") {
		return "", false
	}
	p := x.Principal
	switch {
	case p == nil:
		return "", true
	case name == AuthIssuer:
		return p.Issuer, true
	case name == AuthSubject:
		return p.Subject, true
	case name == AuthClientID:
		return p.ClientID, true
	case name == AuthScopes:
		return strings.Join(p.Scopes, " "), true
	}
	v, _ = p.Claim(claim)
	return Clip(v), true
}

// PrincipalTemplate is the verified principal as a key template: its
// issuer and subject (two issuers may name different people alike).
const PrincipalTemplate = "{http.mcp." + AuthIssuer + "} {http.mcp." + AuthSubject + "}"
