package caddyfile

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/handler"
	"github.com/caddymcp/caddy-mcp/limits"
)

// features is the features map the adaptation writes: each name followed
// by its feature's configuration (rate_limits by its limits).
func features(t testing.TB, kv ...any) caddy.ModuleMap {
	t.Helper()
	m := make(caddy.ModuleMap)
	for i := 0; i+1 < len(kv); i += 2 {
		name, cfg := kv[i].(string), kv[i+1]
		switch c := cfg.(type) {
		case map[string]*limits.Config:
			cfg = &limits.Feature{Limits: c}
		case *guard.Config:
			cfg = &guard.Feature{Config: *c}
		}
		raw, err := json.Marshal(cfg)
		require.NoError(t, err)
		m[name] = raw
	}
	return m
}

// rateLimits is the rate limits' configuration cfg holds.
func rateLimits(t testing.TB, cfg *handler.Handler) *limits.Feature {
	t.Helper()
	var f limits.Feature
	require.NoError(t, json.Unmarshal(cfg.FeaturesRaw["rate_limits"], &f))
	return &f
}
