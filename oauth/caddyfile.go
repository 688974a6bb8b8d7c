package oauth

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
)

// UnmarshalCaddyfile reads
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
func (f *Feature) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the subdirective's name
	block := featurefile.At(d)
	if d.NextArg() {
		return d.ArgErr()
	}
	a := &f.Config
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] && sub != "issuer" && sub != "tool" && sub != "prompt" && sub != "uri" {
			return d.Errf("authorization: %s given twice", sub)
		}
		seen[sub] = true
		if err := readSetting(d, a, sub); err != nil {
			return err
		}
	}
	if err := a.Validate(); err != nil {
		return featurefile.ErrAt(block, fmt.Errorf("authorization: %w", err))
	}
	return nil
}

// words are the subdirectives of authorization's blocks.
var words = map[string][]string{
	"authorization": {"issuer", "resource", "scopes", "leeway", "strip_token", "tool", "prompt", "uri"},
	"issuer":        {"jwks", "introspect"},
}

func readSetting(d *caddyfile.Dispenser, a *Config, sub string) error {
	var err error
	switch sub {
	case "issuer":
		err = readIssuer(d, a)
	case "resource":
		a.Resource, err = featurefile.OneArg(d)
	case "scopes":
		a.Scopes, err = featurefile.ManyArgs(d)
	case "leeway":
		a.Leeway, err = featurefile.PositiveDuration(d)
	case "strip_token":
		a.StripToken, err = true, featurefile.NoArgs(d)
	case "tool":
		a.ToolScopes, err = readScopeRule(d, a.ToolScopes)
	case "prompt":
		a.PromptScopes, err = readScopeRule(d, a.PromptScopes)
	case "uri":
		a.ResourceScopes, err = readScopeRule(d, a.ResourceScopes)
	default:
		return featurefile.Unrecognized(d, "authorization", sub, words["authorization"]...)
	}
	return err
}

// readIssuer reads issuer <url> [jwks <url>], and its block, if it has
// one.
func readIssuer(d *caddyfile.Dispenser, a *Config) error {
	args := d.RemainingArgs()
	var is IssuerConfig
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
			is.JWKS, err = featurefile.OneArg(d)
		case sub == "introspect" && is.Introspection == nil:
			is.Introspection, err = readIntrospect(d)
		case sub == "jwks" || sub == "introspect":
			return d.Errf("issuer: %s given twice", sub)
		default:
			return featurefile.Unrecognized(d, "issuer", sub, words["issuer"]...)
		}
		if err != nil {
			return err
		}
	}
	a.Issuers = append(a.Issuers, is)
	return nil
}

// readIntrospect reads introspect <client_id> <client_secret> [<endpoint>].
func readIntrospect(d *caddyfile.Dispenser) (*IntrospectionConfig, error) {
	args := d.RemainingArgs()
	if len(args) < 2 || len(args) > 3 {
		return nil, d.Errf("introspect takes <client_id> <client_secret> [<endpoint>], got %d values", len(args))
	}
	in := &IntrospectionConfig{ClientID: args[0], ClientSecret: args[1]}
	if len(args) == 3 {
		in.Endpoint = args[2]
	}
	return in, nil
}

// readScopeRule reads <glob> <scope...> after rules.
func readScopeRule(d *caddyfile.Dispenser, rules []ScopeRule) ([]ScopeRule, error) {
	sub := d.Val()
	args := d.RemainingArgs()
	if len(args) < 2 {
		return nil, d.Errf("%s takes <glob> <scope...>", sub)
	}
	return append(rules, ScopeRule{Match: args[0], Scopes: args[1:]}), nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Feature)(nil)
