package caddyfile

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/handler"
)

// unmarshalAuthorization reads
//
//	authorization {
//		issuer <url> [jwks <url>] [{  # one per trusted issuer
//			jwks <url>
//			introspect <client_id> <client_secret> [<endpoint>]
//		}]
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

// issuer reads issuer <url> [jwks <url>], and its block, if it has one.
func issuer(d *caddyfile.Dispenser, a *handler.Authorization) error {
	args := d.RemainingArgs()
	var is handler.AuthorizationIssuer
	switch {
	case len(args) == 1:
		is.URL = args[0]
	case len(args) == 3 && args[1] == "jwks":
		is.URL, is.JWKS = args[0], args[2]
	default:
		return d.Errf("issuer takes <url> [jwks <url>], got %q", args)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch sub := d.Val(); {
		case sub == "jwks" && is.JWKS == "":
			is.JWKS, err = oneArg(d)
		case sub == "introspect" && is.Introspection == nil:
			is.Introspection, err = introspect(d)
		case sub == "jwks" || sub == "introspect":
			return d.Errf("issuer: %s given twice", sub)
		default:
			return unrecognized(d, "issuer", sub)
		}
		if err != nil {
			return err
		}
	}
	a.Issuers = append(a.Issuers, is)
	return nil
}

// introspect reads introspect <client_id> <client_secret> [<endpoint>].
func introspect(d *caddyfile.Dispenser) (*handler.AuthorizationIntrospection, error) {
	args := d.RemainingArgs()
	if len(args) < 2 || len(args) > 3 {
		return nil, d.Errf("introspect takes <client_id> <client_secret> [<endpoint>], got %d values", len(args))
	}
	in := &handler.AuthorizationIntrospection{ClientID: args[0], ClientSecret: args[1]}
	if len(args) == 3 {
		in.Endpoint = args[2]
	}
	return in, nil
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
