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
// the series of a name no config labels any more are deleted, so that the
// series stay bounded however often the config is reloaded.
type Tools struct {
	reg      *prometheus.Registry
	seen     map[string]bool
	users    int
	released bool
}

var (
	// toolsMu guards every set, and the observations labelled by them:
	// a series is never observed after its deletion.
	toolsMu  sync.Mutex
	toolSets = map[*prometheus.Registry]*Tools{}
	// toolUses counts the sets that label each name.
	toolUses = map[string]int{}
	// processTools label for a handler provisioned without a config's
	// registry, and for a nil *Tools.
	processTools = &Tools{seen: map[string]bool{}}
)

// ToolsOf is the tool names of ctx's config, shared by its handlers: each
// one that takes them releases them (Release) at its Cleanup.
func ToolsOf(ctx caddy.Context) *Tools {
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return processTools
	}
	toolsMu.Lock()
	defer toolsMu.Unlock()
	t := toolSets[reg]
	if t == nil {
		t = &Tools{reg: reg, seen: map[string]bool{}}
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
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if t.users--; t.users > 0 || t.released {
		return
	}
	t.released = true
	delete(toolSets, t.reg)
	for name := range t.seen {
		if toolUses[name]--; toolUses[name] == 0 {
			delete(toolUses, name)
			duration.DeletePartialMatch(prometheus.Labels{"gen_ai_tool_name": name})
		}
	}
	clear(t.seen)
}

// label is tool as a label: itself among the first MaxTools t saw, else
// "_OTHER"; once t is released (a request of a config reloaded since),
// itself only while another config labels it. toolsMu is held.
func (t *Tools) label(tool string) string {
	switch {
	case tool == "":
		return ""
	case t.released && toolUses[tool] > 0, t.seen[tool]:
		return tool
	case t.released, len(t.seen) >= MaxTools:
		return promreg.Other
	}
	t.seen[tool] = true
	toolUses[tool]++
	return tool
}

// observe records m's duration, labelled by t.
func (t *Tools) observe(m *message, errorType string, now time.Time) {
	if t == nil {
		t = processTools
	}
	toolsMu.Lock()
	defer toolsMu.Unlock()
	duration.WithLabelValues(m.method, t.label(m.tool), errorLabel(errorType)).Observe(now.Sub(m.start).Seconds())
}
