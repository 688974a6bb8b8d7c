package caddyfile

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/handler"
)

// unmarshalAuthorization reads
//
//	authorization {
//		issuer <url> [jwks <url>]   # one line per trusted issuer
//		resource <url>
//		scopes <scope...>
//		leeway <duration>
//		strip_token
//		tool <glob> <scope...>      # one line per rule; the first that matches
//		prompt <glob> <scope...>
//		uri <glob> <scope...>
//	}
func unmarshalAuthorization(d *caddyfile.Dispenser) (*handler.Authorization, error) {
	block := at(d)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	a := new(handler.Authorization)
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] && sub != "issuer" && sub != "tool" && sub != "prompt" && sub != "uri" {
			return nil, d.Errf("authorization: %s given twice", sub)
		}
		seen[sub] = true
		var err error
		switch sub {
		case "issuer":
			err = issuer(d, a)
		case "resource":
			a.Resource, err = oneArg(d)
		case "scopes":
			a.Scopes, err = manyArgs(d)
		case "leeway":
			a.Leeway, err = positiveDuration(d)
		case "strip_token":
			a.StripToken, err = true, noArgs(d)
		case "tool":
			a.ToolScopes, err = scopeRule(d, a.ToolScopes)
		case "prompt":
			a.PromptScopes, err = scopeRule(d, a.PromptScopes)
		case "uri":
			a.ResourceScopes, err = scopeRule(d, a.ResourceScopes)
		default:
			return nil, unrecognized(d, "authorization", sub)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := a.Validate(); err != nil {
		return nil, errAt(block, fmt.Errorf("authorization: %w", err))
	}
	return a, nil
}

// issuer reads issuer <url> [jwks <url>].
func issuer(d *caddyfile.Dispenser, a *handler.Authorization) error {
	args := d.RemainingArgs()
	switch {
	case len(args) == 1:
		a.Issuers = append(a.Issuers, handler.AuthorizationIssuer{URL: args[0]})
	case len(args) == 3 && args[1] == "jwks":
		a.Issuers = append(a.Issuers, handler.AuthorizationIssuer{URL: args[0], JWKS: args[2]})
	default:
		return d.Errf("issuer takes <url> [jwks <url>], got %q", args)
	}
	return nil
}

// scopeRule reads <glob> <scope...> after rules.
func scopeRule(d *caddyfile.Dispenser, rules []handler.AuthorizationScopeRule) ([]handler.AuthorizationScopeRule, error) {
	sub := d.Val()
	args := d.RemainingArgs()
	if len(args) < 2 {
		return nil, d.Errf("%s takes <glob> <scope...>", sub)
	}
	return append(rules, handler.AuthorizationScopeRule{Match: args[0], Scopes: args[1:]}), nil
}
