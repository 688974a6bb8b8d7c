package tracing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toolSeries are the tool names the duration has series for.
func toolSeries(t *testing.T) map[string]bool {
	ch := make(chan prometheus.Metric, 4096)
	duration.Collect(ch)
	close(ch)
	out := map[string]bool{}
	for m := range ch {
		var d dto.Metric
		require.NoError(t, m.Write(&d))
		for _, l := range d.GetLabel() {
			if l.GetName() == "gen_ai_tool_name" {
				out[l.GetValue()] = true
			}
		}
	}
	return out
}

func newConfig(t *testing.T) caddy.Context {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

func called(tools *Tools, tool string) {
	tools.observe(&message{method: "tools/call", tool: tool, start: time.Now()}, "", time.Now())
}

// A config's handlers share its tool names; a reload starts anew, and once
// the old config is released, the series of the names only it labelled
// are gone.
func TestToolNamesBelongToTheConfigThatLoadsThem(t *testing.T) {
	old := newConfig(t)
	a, b := ToolsOf(old), ToolsOf(old)
	require.Same(t, a, b, "one config's handlers")
	for i := range MaxTools {
		called(a, fmt.Sprintf("tools-test-%d", i))
	}
	called(b, "tools-test-past-the-bound")
	series := toolSeries(t)
	assert.True(t, series["tools-test-0"])
	assert.False(t, series["tools-test-past-the-bound"], "_OTHER past the bound")

	reloaded := ToolsOf(newConfig(t))
	require.NotSame(t, a, reloaded)
	called(reloaded, "tools-test-past-the-bound")
	called(reloaded, "tools-test-1")
	assert.True(t, toolSeries(t)["tools-test-past-the-bound"], "a new config labels the first it sees")

	a.Release()
	assert.True(t, toolSeries(t)["tools-test-0"], "until its last handler lets go")
	b.Release()
	series = toolSeries(t)
	assert.False(t, series["tools-test-0"], "only the old config labelled it")
	assert.True(t, series["tools-test-1"], "the new config labels it too")
	assert.True(t, series["tools-test-past-the-bound"])

	// A call of the old config that ends after the reload: its name is a
	// label only while another config labels it.
	called(b, "tools-test-2")
	called(b, "tools-test-1")
	series = toolSeries(t)
	assert.False(t, series["tools-test-2"])
	assert.True(t, series["tools-test-1"])
	reloaded.Release()
	assert.False(t, toolSeries(t)["tools-test-1"])
}
