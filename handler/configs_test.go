package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/internal/configs"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/results"
	"github.com/caddymcp/caddy-mcp/validate"
)

// inConfig provisions h as a handler of the config ctx stands for (a
// handler provisioned on its own is a config of its own), logging nowhere.
// The test cleans it up.
func inConfig(t *testing.T, ctx caddy.Context, h *Handler) *Handler {
	t.Helper()
	h.logger = zap.NewNop()
	require.NoError(t, h.Provision(ctx))
	require.NoError(t, h.Validate())
	return h
}

// alive reports whether the config ctx stands for has a load.
func alive(ctx caddy.Context) bool {
	return slices.Contains(loads.IDs(), configs.ID(ctx))
}

// guardsListed are the guard names /mcp/status lists, in its order.
func guardsListed(t *testing.T, names ...string) []string {
	t.Helper()
	var listed []string
	for _, h := range loads.Live() {
		if s, ok := statusOfFeature[guard.Status](h.status(), "concurrency"); ok && slices.Contains(names, s.Name) {
			listed = append(listed, s.Name)
		}
	}
	return listed
}

func TestDuringAReloadTheStatusListsBothConfigsHandlersUntilTheOldIsCleanedUp(t *testing.T) {
	oldCtx, cancelOld := newCaddyContext()
	defer cancelOld()
	newCtx, cancelNew := newCaddyContext()
	defer cancelNew()
	old := inConfig(t, oldCtx, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "reload_old", Max: 1})})
	assert.Equal(t, []string{"reload_old"}, guardsListed(t, "reload_old", "reload_new"))

	// The new config is provisioned before the old one is cleaned up.
	fresh := inConfig(t, newCtx, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "reload_new", Max: 1})})
	assert.Equal(t, []string{"reload_old", "reload_new"}, guardsListed(t, "reload_old", "reload_new"), "the old config's first")
	statusOf(t, "reload_old")
	statusOf(t, "reload_new")

	unload(t, old)
	assert.Equal(t, []string{"reload_new"}, guardsListed(t, "reload_old", "reload_new"))
	assert.False(t, alive(oldCtx), "the old config's state went with its last handler")
	unload(t, fresh)
	assert.Empty(t, guardsListed(t, "reload_old", "reload_new"))
	assert.False(t, alive(newCtx))
}

func TestAConfigsStateGoesWithItsLastHandlerEvenOneThatFailed(t *testing.T) {
	ctx, cancel := newCaddyContext()
	defer cancel()
	a := inConfig(t, ctx, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "state_a", Max: 1})})
	b := inConfig(t, ctx, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "state_b", Max: 1})})
	require.Same(t, a.joined, b.joined, "one config, one state")
	failed := &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "state_a", Max: 2}), logger: zap.NewNop()}
	require.Error(t, failed.Provision(ctx), "settings that differ from a's")
	assert.Equal(t, []string{"state_a", "state_b"}, guardsListed(t, "state_a", "state_b"), "a handler that failed is not listed")

	unload(t, failed)
	require.NoError(t, failed.Cleanup(), "a second Cleanup does not leave twice")
	unload(t, a)
	assert.True(t, alive(ctx), "b is still there")
	assert.Equal(t, []string{"state_b"}, guardsListed(t, "state_a", "state_b"))
	unload(t, b)
	assert.False(t, alive(ctx))

	// A config loaded afterwards starts anew: the name is free again.
	again, cancelAgain := newCaddyContext()
	defer cancelAgain()
	c := inConfig(t, again, &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Name: "state_a", Max: 2})})
	unload(t, c)
}

func TestAReloadStartsAFreshSetOfToolLabels(t *testing.T) {
	oldCtx, cancelOld := newCaddyContext()
	defer cancelOld()
	budget := features(t, "results", &Results{Max: 10})
	a := inConfig(t, oldCtx, &Handler{FeaturesRaw: budget})
	b := inConfig(t, oldCtx, &Handler{FeaturesRaw: budget})
	defer func() { _ = a.Cleanup(); _ = b.Cleanup() }()
	labels := resultLabels(t, a)
	require.True(t, labels == resultLabels(t, b), "the handlers of a config share its labels")
	for i := range results.MaxTools {
		require.Equal(t, fmt.Sprint("tool_", i), labels.Of(fmt.Sprint("tool_", i)))
	}
	assert.Equal(t, promreg.Other, labels.Of("one_more"), "bounded per config")

	newCtx, cancelNew := newCaddyContext()
	defer cancelNew()
	c := inConfig(t, newCtx, &Handler{FeaturesRaw: budget})
	defer func() { _ = c.Cleanup() }()
	assert.False(t, labels == resultLabels(t, c))
	assert.Equal(t, "one_more", resultLabels(t, c).Of("one_more"), "the new config's set is its own")
	assert.Equal(t, "tool_0", resultLabels(t, c).Of("tool_0"), "a name the old set labelled is labelled again")
}

// resultLabels are the tool labels the budgets of h's config share.
func resultLabels(t *testing.T, h *Handler) interface{ Of(string) string } {
	t.Helper()
	v, err := h.joined.Share("results.tool_labels", func() (any, error) { return nil, errors.New("no budgets") })
	require.NoError(t, err)
	return v.(interface{ Of(string) string })
}

// caddyLoaded reports whether a config Caddy loaded has a load.
func caddyLoaded() bool {
	return slices.ContainsFunc(loads.IDs(), func(id any) bool {
		_, ok := id.(*caddyhttp.App)
		return ok
	})
}

// Caddy itself loads a config, reloads it and stops: the old config's
// state and its uses of the pools are gone once it is cleaned up, and the
// last config's once Caddy stops.
func TestConfigsCaddyLoadsLeaveNoStateNorPoolEntryBehind(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	lockfile := writeLockfile(t)
	config := func(guard string) []byte {
		mcp, err := json.Marshal(map[string]any{
			"handler": "mcp", "features": map[string]any{
				"validate": map[string]any{}, "contract": map[string]any{"file": lockfile},
				"results": map[string]any{"max": 100}, "concurrency": map[string]any{"name": guard, "max": 1},
			},
		})
		require.NoError(t, err)
		return fmt.Appendf(nil, `{"admin":{"disabled":true},"logging":{"logs":{"default":{"level":"ERROR"}}},
			"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"automatic_https":{"disable":true},
			"routes":[{"handle":[%s,{"handler":"static_response","body":"ok"}]}]}}}}}`, mcp)
	}
	require.NoError(t, caddy.Load(config("caddy_old"), true))
	t.Cleanup(func() { _ = caddy.Stop() })
	require.True(t, caddyLoaded())
	assert.Equal(t, []string{"caddy_old"}, guardsListed(t, "caddy_old", "caddy_new"))

	require.NoError(t, caddy.Load(config("caddy_new"), true))
	assert.Equal(t, []string{"caddy_new"}, guardsListed(t, "caddy_old", "caddy_new"), "the old config was cleaned up")
	assert.True(t, catalogLive(t), "the new config learns tools")

	require.NoError(t, caddy.Stop())
	assert.Empty(t, guardsListed(t, "caddy_old", "caddy_new"))
	assert.False(t, caddyLoaded(), "no config's state is left")
	assert.False(t, catalogLive(t), "no config holds the tool catalog")
}

// writeLockfile writes a lockfile of one tool, and returns its path.
func writeLockfile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.lock.json")
	raw, err := (&contract.Lockfile{Version: contract.Version, Server: "http://pools.test/mcp", Tools: []contract.Tool{{Name: "pools_test_tool"}}}).Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// catalogLive reports whether the process holds a tool catalog: its
// metrics are collected while it does.
func catalogLive(t *testing.T) bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range validate.Collectors() {
		require.NoError(t, reg.Register(c))
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	return slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == "caddy_mcp_tool_catalog_bytes" })
}
