package results

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/internal/panics/panicstest"
)

// The results over their budget that were not logged are counted on the
// log sampler's timer, a goroutine of its own: a log that panics there
// costs that line, and Caddy and the sampler go on.
func TestALogThatPanicsOnTheSamplersTimerCostsTheLineOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, logger := panicstest.New("more of a tool's results")
		b := New(&Config{Max: 10}, nil, logger)
		defer b.Stop()
		h := &held{b: b, tool: "big", budget: 10}
		for range 2 {
			for range 3 {
				h.over(actionRefused, 100)
			}
			time.Sleep(2*logEvery + logEvery/2)
			synctest.Wait()
		}
		const over = "a tool's result is over its budget"
		assert.Equal(t, []string{over, "recovered a panic", over, "recovered more panics"}, log.Lines())
	})
}
