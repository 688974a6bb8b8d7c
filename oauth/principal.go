package oauth

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Principal is who a verified token speaks for.
type Principal struct {
	Issuer   string
	Subject  string
	ClientID string
	Scopes   []string
	Expiry   time.Time
	// Claims are the token's claims, as they were signed.
	Claims map[string]json.RawMessage
	// view is the principal as the other features read it, made once:
	// a remembered token costs no allocation per request.
	view *feature.Principal
	// held are the bytes the principal holds, as the cache counts them.
	held int
	// made is the verified credential the upstream route reads, made
	// once for a remembered token (verified).
	made atomic.Pointer[feature.Verified]
}

// verified is p's credential, token, verified for resource, as the
// handlers of the upstream route read it (feature.VerifiedVar).
func (p *Principal) verified(token, resource string) *feature.Verified {
	if v := p.made.Load(); v != nil && v.Token == token && v.Audience == resource {
		return v
	}
	v := &feature.Verified{Principal: p.view, Token: token, Audience: resource, Expiry: p.Expiry}
	p.made.Store(v)
	return v
}

// complete makes what is made once of p, the principal of a valid token:
// its view, and the bytes it holds.
func (p *Principal) complete() *Principal {
	p.view = viewOf(p)
	p.held = len(p.Issuer) + len(p.Subject) + len(p.ClientID)
	for _, s := range p.Scopes {
		p.held += len(s) + 16
	}
	for name, value := range p.Claims {
		// A long value is rounded up to its size class by the allocator:
		// by an eighth of it at most.
		p.held += len(name) + len(value) + len(value)/8 + claimBytes
	}
	return p
}

// viewOf is p as the other features read it.
func viewOf(p *Principal) *feature.Principal {
	return &feature.Principal{
		Issuer:   p.Issuer,
		Subject:  p.Subject,
		ClientID: p.ClientID,
		Scopes:   p.Scopes,
		Claim: func(name string) (string, bool) {
			raw, ok := p.Claims[name]
			if !ok {
				return "", false
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return s, true
			}
			return string(raw), true
		},
	}
}

// firstString is the first of names that is a string claim.
func firstString(claims map[string]json.RawMessage, names ...string) string {
	for _, n := range names {
		var s string
		if json.Unmarshal(claims[n], &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// scopes are the token's scopes: "scope", a space-separated string (RFC
// 9068, RFC 8693), or "scp", a list or a string, as some issuers write it.
func scopes(claims map[string]json.RawMessage) []string {
	if s := firstString(claims, "scope", "scp"); s != "" {
		return strings.Fields(s)
	}
	var list []string
	if json.Unmarshal(claims["scp"], &list) == nil {
		return list
	}
	return nil
}
