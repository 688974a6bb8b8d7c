package feature

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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

// VerifiedVar is the request variable (caddyhttp.SetVar) under which the
// identity phase leaves the credential it verified, a *Verified, for the
// handlers of the upstream route: one that gives a server a credential of
// its own (package credential) exchanges the token the gateway verified,
// never a header written after the check. The gateway's own requests
// upstream carry a copy of the client's variables, and so it too.
const VerifiedVar = "caddy_mcp.verified"

// Verified is a verified credential: who it speaks for, and the token
// itself. It prints as its principal's issuer and subject, never as the
// token, wherever a variable is printed ({http.vars.*}, a log field).
type Verified struct {
	Principal *Principal
	// Token is the access token as the client sent it and the gateway
	// verified it.
	Token string
	// Audience is the resource it was verified for: the gateway's own.
	Audience string
	// Expiry is when the token expires.
	Expiry time.Time
}

// String is v without its token.
func (v *Verified) String() string {
	if v == nil || v.Principal == nil {
		return ""
	}
	return v.Principal.Issuer + " " + v.Principal.Subject
}

// GoString is v without its token, as %#v prints it.
func (v *Verified) GoString() string { return "feature.Verified{" + v.String() + "}" }

// MarshalJSON is v without its token.
func (v *Verified) MarshalJSON() ([]byte, error) { return json.Marshal(v.String()) }

// VerifiedOf is the credential verified for r, nil when none was.
func VerifiedOf(r *http.Request) *Verified {
	v, _ := caddyhttp.GetVar(r.Context(), VerifiedVar).(*Verified)
	return v
}
