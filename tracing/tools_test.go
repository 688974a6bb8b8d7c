package tracing

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
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

// config is what a config's handlers share (feature.Host.ShareInConfig),
// as the core keeps it.
type config struct {
	feature.Host
	shared map[string]any
}

func (c *config) ShareInConfig(key string, make func() (any, error)) (any, error) {
	if v, ok := c.shared[key]; ok {
		return v, nil
	}
	v, err := make()
	if err == nil {
		c.shared[key] = v
	}
	return v, err
}

// close closes what the config shared, as its last handler's cleanup does.
func (c *config) close(t *testing.T) {
	for _, v := range c.shared {
		require.NoError(t, v.(io.Closer).Close())
	}
}

// toolsOf are the tool names a handler of c labels the metric with.
func toolsOf(t *testing.T, c *config) *Tools {
	parts, err := new(Feature).Parts(c)
	require.NoError(t, err)
	return parts.Tracer.(tracer).tools
}

func called(tools *Tools, tool string) {
	tools.observe(&message{method: "tools/call", tool: tool, start: time.Now()}, "", time.Now())
}

// A config's handlers share its tool names; a reload starts anew, and once
// the old config is released, the series of the names only it labelled
// are gone.
func TestToolNamesBelongToTheConfigThatLoadsThem(t *testing.T) {
	old := &config{shared: map[string]any{}}
	a, b := toolsOf(t, old), toolsOf(t, old)
	require.Same(t, a, b, "one config's handlers")
	for i := range MaxTools {
		called(a, fmt.Sprintf("tools-test-%d", i))
	}
	called(b, "tools-test-past-the-bound")
	series := toolSeries(t)
	assert.True(t, series["tools-test-0"])
	assert.False(t, series["tools-test-past-the-bound"], "_OTHER past the bound")

	next := &config{shared: map[string]any{}}
	reloaded := toolsOf(t, next)
	require.NotSame(t, a, reloaded)
	called(reloaded, "tools-test-past-the-bound")
	called(reloaded, "tools-test-1")
	assert.True(t, toolSeries(t)["tools-test-past-the-bound"], "a new config labels the first it sees")

	old.close(t)
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
	next.close(t)
	assert.False(t, toolSeries(t)["tools-test-1"])
}
