package results

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// panickingLog records its lines, and panics on the line that counts the
// results not logged, which the log sampler writes on its own timer.
type panickingLog struct {
	zapcore.Core
	mu    sync.Mutex
	lines []string
}

func (p *panickingLog) Enabled(zapcore.Level) bool { return true }
func (p *panickingLog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, p)
}

func (p *panickingLog) Write(e zapcore.Entry, _ []zapcore.Field) error {
	if strings.HasPrefix(e.Message, "more of a tool's results") {
		panic("the log panics")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, e.Message)
	return nil
}

// The results over their budget that were not logged are counted on the
// log sampler's timer, a goroutine of its own: a log that panics there
// costs that line, and Caddy and the sampler go on.
func TestALogThatPanicsOnTheSamplersTimerCostsTheLineOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &panickingLog{Core: zapcore.NewNopCore()}
		b := New(&Config{Max: 10}, zap.New(log))
		defer b.Stop()
		h := &held{b: b, tool: "big", budget: 10}
		for range 2 {
			for range 3 {
				h.over(actionRefused, 100)
			}
			time.Sleep(2*logEvery + logEvery/2)
			synctest.Wait()
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		const over = "a tool's result is over its budget"
		assert.Equal(t, []string{over, "recovered a panic", over, "recovered more panics"}, log.lines)
	})
}
