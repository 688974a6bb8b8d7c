package tracing

import (
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

// Tools are the tool names one config labels the duration with: the
// first MaxTools it sees, every other one "_OTHER". They belong to the
// config that loads them (its handlers share them, found by the config's
// metrics registry) and are released with it: a reload starts anew, and
// the series of a name no config labels any more are deleted
// (promreg.SharedLabels), so that the series stay bounded however often
// the config is reloaded.
type Tools struct {
	reg    *prometheus.Registry
	labels *promreg.ConfigLabels
	users  int
}

var (
	// toolUses are the names every config's set labels.
	toolUses = promreg.NewSharedLabels(func(name string) {
		duration.DeletePartialMatch(prometheus.Labels{"gen_ai_tool_name": name})
	})
	// setsMu guards toolSets, the sets by their config's registry.
	setsMu   sync.Mutex
	toolSets = map[*prometheus.Registry]*Tools{}
	// processTools label for a handler provisioned without a config's
	// registry, and for a nil *Tools.
	processTools = &Tools{labels: toolUses.ForConfig(MaxTools)}
)

// ToolsOf is the tool names of ctx's config, shared by its handlers: each
// one that takes them releases them (Release) at its Cleanup.
func ToolsOf(ctx caddy.Context) *Tools {
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return processTools
	}
	setsMu.Lock()
	defer setsMu.Unlock()
	t := toolSets[reg]
	if t == nil {
		t = &Tools{reg: reg, labels: toolUses.ForConfig(MaxTools)}
		toolSets[reg] = t
	}
	t.users++
	return t
}

// Release gives back a handler's share of t; the last one releases the
// names, and deletes the series of those no other config labels.
func (t *Tools) Release() {
	if t == nil || t == processTools {
		return
	}
	setsMu.Lock()
	defer setsMu.Unlock()
	if t.users--; t.users > 0 {
		return
	}
	if toolSets[t.reg] == t {
		delete(toolSets, t.reg)
	}
	t.labels.Release()
}

// observe records m's duration, labelled by t: a request of a config
// released since labels a name only while another config does.
func (t *Tools) observe(m *message, errorType string, now time.Time) {
	if t == nil {
		t = processTools
	}
	tool := m.tool
	if tool == "" {
		duration.WithLabelValues(m.method, "", errorLabel(errorType)).Observe(now.Sub(m.start).Seconds())
		return
	}
	t.labels.Observe(tool, func(label string) {
		duration.WithLabelValues(m.method, label, errorLabel(errorType)).Observe(now.Sub(m.start).Seconds())
	})
}
