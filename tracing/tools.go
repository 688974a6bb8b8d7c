package tracing

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

// Tools are the tool names one config labels the duration with: the
// first MaxTools it sees, every other one "_OTHER". They belong to the
// config that loads them (its handlers share them:
// feature.Host.ShareInConfig) and are closed with it: a reload starts
// anew, and the series of a name no config labels any more are deleted
// (promreg.SharedLabels), so that the series stay bounded however often
// the config is reloaded.
type Tools struct {
	labels *promreg.ConfigLabels
}

var (
	// toolUses are the names every config's set labels.
	toolUses = promreg.NewSharedLabels(func(name string) {
		duration.DeletePartialMatch(prometheus.Labels{"gen_ai_tool_name": name})
	})
	// processTools label for a nil *Tools: spans started without a
	// config.
	processTools = newTools()
)

// newTools are a config's tool names, none seen yet.
func newTools() *Tools { return &Tools{labels: toolUses.ForConfig(MaxTools)} }

// Close lets the names go, deleting the series of those no other config
// labels, once the config's last handler is cleaned up.
func (t *Tools) Close() error {
	t.labels.Release()
	return nil
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
