package results

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

// The budgets of a config share its set of tool labels, bounded to
// MaxTools; a reload's budgets start a new set, and the series of the
// names the old one labelled go on counting.
func TestBudgetsLabelTheMetricWithTheirConfigsSetOfTools(t *testing.T) {
	labels := NewToolLabels()
	a, b := New(&Config{Max: 10}, labels, zap.NewNop()), New(&Config{Max: 10}, labels, zap.NewNop())
	defer a.Stop()
	defer b.Stop()
	overCount := func(tool string) float64 {
		return featuretest.Counted(t, overBudget.WithLabelValues(tool, actionRefused))
	}
	over := func(budgets *Budgets, tool string) {
		(&held{b: budgets, tool: tool, budget: 10, id: []byte("1")}).over(actionRefused, 100)
	}
	// The series outlive the budgets, and so runs of the test: what is
	// counted is told from what was.
	late, first := overCount("labels_late"), overCount("labels_a_0")
	for i := range MaxTools / 2 {
		over(a, fmt.Sprint("labels_a_", i))
		over(b, fmt.Sprint("labels_b_", i))
	}
	other := overCount(promreg.Other)
	over(a, "labels_late")
	assert.Equal(t, other+1, overCount(promreg.Other), "past the config's bound, shared by its budgets")
	assert.Equal(t, late, overCount("labels_late"))

	reloaded := New(&Config{Max: 10}, NewToolLabels(), zap.NewNop())
	defer reloaded.Stop()
	over(reloaded, "labels_late")
	assert.Equal(t, late+1, overCount("labels_late"), "a new config's set labels it")
	over(reloaded, "labels_a_0")
	assert.Equal(t, first+2, overCount("labels_a_0"), "an old config's series goes on counting")

	own := New(&Config{Max: 10}, nil, zap.NewNop())
	defer own.Stop()
	assert.NotSame(t, labels, own.labels, "without a config's set, budgets have their own")
}
