package handler

import (
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/keys"
)

// emptyKeysCounted reads caddy_mcp_empty_keys_total{kind="rate_limit",name=name}
// from a registry holding the handler's metrics, as Caddy's /metrics would
// show it: 0 when there is no such series.
func emptyKeysCounted(t *testing.T, name string) float64 {
	t.Helper()
	ctx, cancel := newCaddyContext()
	defer cancel()
	require.NoError(t, promreg.Register(ctx, keys.Collectors()...))
	fams, err := ctx.GetMetricsRegistry().Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "caddy_mcp_empty_keys_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == "rate_limit" && labels["name"] == name {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Finding 15: a key template that expands to "" on a request puts every such
// request under one shared key. Each one is counted in
// caddy_mcp_empty_keys_total{kind="rate_limit",name=...}, and logged at warn
// at most once a minute: three requests without the header the key reads
// count 3 and write one line; a minute later, one more writes a second.
func TestEmptyKeyIsCountedAndWarnedOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const name = "empty_key_warned"
		core, logs := observer.New(zapcore.WarnLevel)
		h := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{name: {Rate: "100/1h", Key: "{header.X-Client}"}}), logger: zap.New(core)})
		u := &upstream{}
		before := emptyKeysCounted(t, name)

		for i := range 3 {
			requireForwarded(t, u, i+1, serve(t, h, post(toolsCall(`1`, "search")), u))
			time.Sleep(time.Second)
		}
		assert.Equal(t, 3.0, emptyKeysCounted(t, name)-before, "every request whose key is empty is counted")
		warned := logs.FilterLevelExact(zapcore.WarnLevel).All()
		require.Len(t, warned, 1, "one warning for the three requests")
		assert.Equal(t, name, warned[0].ContextMap()["rate_limit"], "the warning names the limit")

		time.Sleep(time.Minute)
		requireForwarded(t, u, 4, serve(t, h, post(toolsCall(`2`, "search")), u))
		assert.Equal(t, 4.0, emptyKeysCounted(t, name)-before)
		assert.Len(t, logs.FilterLevelExact(zapcore.WarnLevel).All(), 2, "a minute later, the next empty key is logged again")

		requireForwarded(t, u, 5, serve(t, h, post(toolsCall(`3`, "search"), header("X-Client", "a")), u))
		assert.Equal(t, 4.0, emptyKeysCounted(t, name)-before, "a request giving the header has a key")
	})
}

// limitStatusJSON is the admin status of h's only rate limit, as /mcp/status
// writes it.
func limitStatusJSON(t *testing.T, h *Handler) map[string]any {
	t.Helper()
	raw, err := json.Marshal(h.status())
	require.NoError(t, err)
	var s struct {
		Features struct {
			RateLimits struct {
				Limits []map[string]any `json:"limits"`
			} `json:"rate_limits"`
		} `json:"features"`
	}
	require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
	require.Len(t, s.Features.RateLimits.Limits, 1, "%s", raw)
	return s.Features.RateLimits.Limits[0]
}

// Finding 16: a reload that changes max_keys applies it to the buckets the
// limit keeps across the reload. With max_keys 1, a second client is on the
// overflow bucket (and a third finds it empty); the new config, provisioned
// with max_keys 3 before the old one is cleaned up, gives new clients
// buckets of their own up to 3, and its status shows max_keys 3 and that
// the overflow bucket is in use.
func TestReloadThatChangesMaxKeysAppliesIt(t *testing.T) {
	const name = "max_keys_reloaded"
	old := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{name: {Rate: "1/1h", MaxKeys: 1}})})
	u := &upstream{}
	call := toolsCall(`1`, "search")
	requireForwarded(t, u, 1, serve(t, old, post(call, fromClient("192.0.2.1")), u))
	requireForwarded(t, u, 2, serve(t, old, post(call, fromClient("192.0.2.2")), u))
	w := serve(t, old, post(call, fromClient("192.0.2.3")), u)
	require.Equal(t, 2, u.calls, "192.0.2.2 emptied the overflow bucket 192.0.2.3 shares: %s", w.Body)
	st := limitStatusJSON(t, old)
	assert.Equal(t, 1.0, st["max_keys"], "%v", st)
	assert.Equal(t, true, st["overflowing"], "%v", st)

	// A reload provisions the new config before it cleans up the old one.
	updated := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{name: {Rate: "1/1h", MaxKeys: 3}})})
	unload(t, old)

	requireForwarded(t, u, 3, serve(t, updated, post(call, fromClient("192.0.2.4")), u))
	requireForwarded(t, u, 4, serve(t, updated, post(call, fromClient("192.0.2.5")), u))
	w = serve(t, updated, post(call, fromClient("192.0.2.6")), u)
	assert.Equal(t, 4, u.calls, "three keys have buckets of their own: the next shares the empty overflow bucket: %s", w.Body)
	w = serve(t, updated, post(call, fromClient("192.0.2.1")), u)
	assert.Equal(t, 4, u.calls, "the bucket 192.0.2.1 emptied before the reload is kept: %s", w.Body)

	st = limitStatusJSON(t, updated)
	assert.Equal(t, 3.0, st["max_keys"], "%v", st)
	assert.Equal(t, true, st["overflowing"], "%v", st)
	assert.Equal(t, 4.0, st["buckets"], "three buckets of their own and the overflow bucket: %v", st)
}

// Finding 16: Validate refuses, in a JSON config, the negative settings that
// the Caddyfile refuses, naming each: max_keys -3, burst -1, max_batch -1,
// read_body_timeout -1s. (A negative max_keys used to mean the default, and
// the others went unchecked until Provision, or not at all.)
func TestValidateRefusesNegativeSettings(t *testing.T) {
	tests := map[string]string{
		"max_keys":          `{"features":{"rate_limits":{"limits":{"neg":{"rate":"10/1m","max_keys":-3}}}}}`,
		"burst":             `{"features":{"rate_limits":{"limits":{"neg":{"rate":"10/1m","burst":-1}}}}}`,
		"max_batch":         `{"max_batch":-1}`,
		"read_body_timeout": `{"read_body_timeout":"-1s"}`,
	}
	for field, cfg := range tests {
		t.Run(field, func(t *testing.T) {
			var h Handler
			require.NoError(t, json.Unmarshal([]byte(cfg), &h))
			h.logger = zap.NewNop()
			ctx, cancel := newCaddyContext()
			defer cancel()
			defer func() { _ = h.Cleanup() }()
			err := errors.Join(h.Provision(ctx), h.Validate())
			require.Error(t, err, "%s must be refused", cfg)
			assert.Contains(t, err.Error(), field)
		})
	}
}

func TestAKeyReadingThePrincipalNeedsAuthorization(t *testing.T) {
	limit := features(t, "rate_limits", map[string]*RateLimit{"per_subject": {Rate: "1/s", Key: "{http.mcp.auth.subject}"}})
	h := &Handler{FeaturesRaw: limit, logger: zap.NewNop()}
	ctx, cancel := newCaddyContext()
	defer cancel()
	err := h.Provision(ctx)
	_ = h.Cleanup()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `rate_limit "per_subject": key "{http.mcp.auth.subject}" reads the verified principal, and no authorization verifies one`)
	maps.Copy(limit, features(t, "authorization", &Authorization{Resource: "https://mcp.example.com/mcp", Issuers: []AuthorizationIssuer{{URL: "https://auth.example.com", JWKS: "https://auth.example.com/jwks"}}}))
	provision(t, &Handler{FeaturesRaw: limit})
}
