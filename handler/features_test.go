package handler

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/limits"
	"github.com/caddymcp/caddy-mcp/oauth"
	"github.com/caddymcp/caddy-mcp/results"
	"github.com/caddymcp/caddy-mcp/session"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
	"github.com/caddymcp/caddy-mcp/validate"
)

// The built-in features' configurations, as the tests write them.
type (
	RateLimit   = limits.Config
	Concurrency = guard.Config
	Sessions    = session.Config
	// Authorization and its parts (package oauth).
	Authorization              = oauth.Config
	AuthorizationIssuer        = oauth.IssuerConfig
	AuthorizationIntrospection = oauth.IntrospectionConfig
	AuthorizationScopeRule     = oauth.ScopeRule
	Tools                      = toolpolicy.Feature
	ToolTimeout                = toolpolicy.Timeout
	Results                    = results.Config
	Contract                   = contract.Feature
	Validate                   = validate.Module
)

// features is a handler's features map: each name followed by its
// feature's configuration (rate_limits by its limits).
func features(t testing.TB, kv ...any) caddy.ModuleMap {
	t.Helper()
	m := make(caddy.ModuleMap)
	for i := 0; i+1 < len(kv); i += 2 {
		name, cfg := kv[i].(string), kv[i+1]
		if l, ok := cfg.(map[string]*RateLimit); ok {
			cfg = map[string]any{"limits": l}
		}
		raw, err := json.Marshal(cfg)
		require.NoError(t, err)
		m[name] = raw
	}
	return m
}

// statusOfFeature is a feature's section of h's status, as its type T.
func statusOfFeature[T any](s HandlerStatus, name string) (T, bool) {
	v, ok := s.Features[name].(T)
	return v, ok
}

// guardOf is h's concurrency guard, nil without one.
func guardOf(h *Handler) *guard.Guard {
	for _, a := range h.entries {
		if g, ok := a.(*guard.Guard); ok {
			return g
		}
	}
	return nil
}
