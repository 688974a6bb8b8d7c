// Package panicstest gives tests a log that panics on demand: the writer
// of a line a goroutine of the gateway's writes, to show that the panic
// ends there (see package panics).
package panicstest

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// Log records the messages of the lines written to it, and panics on a
// line whose message begins with Prefix.
type Log struct {
	zapcore.Core
	Prefix string
	mu     sync.Mutex
	lines  []string
}

// New returns a Log that panics on the lines beginning with prefix, and a
// logger writing to it.
func New(prefix string) (*Log, *zap.Logger) {
	l := &Log{Core: zapcore.NewNopCore(), Prefix: prefix}
	return l, zap.New(l)
}

func (l *Log) Enabled(zapcore.Level) bool { return true }

func (l *Log) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, l)
}

func (l *Log) Write(e zapcore.Entry, _ []zapcore.Field) error {
	if strings.HasPrefix(e.Message, l.Prefix) {
		panic("the log panics")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, e.Message)
	return nil
}

// Lines are the messages written, but the ones it panicked on.
func (l *Log) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// RecoveredAt is the count of panics recovered at site (the panics
// metric).
func RecoveredAt(site string) float64 {
	var m dto.Metric
	if err := panics.Collectors()[0].(*prometheus.CounterVec).WithLabelValues(site).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
