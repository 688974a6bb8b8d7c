package panics

import (
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// newLog is a logger that records every line, at debug and above.
func newLog() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// counted is the count of panics recovered at site.
func counted(t *testing.T, site string) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, recovered.WithLabelValues(site).Write(&m))
	return m.GetCounter().GetValue()
}

// onGoroutine runs f on a goroutine of its own that defers Recover first,
// and waits for it to end.
func onGoroutine(logger *zap.Logger, site string, f func(), release ...func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer Recover(logger, site, release...)
		f()
	}()
	<-done
}

// panicsWith panics with v, from a function the stack names.
func panicsWith(v any) { panic(v) }

func TestAPanicOnAGoroutineEndsThereReleasedLoggedWithItsStackAndCounted(t *testing.T) {
	logger, logs := newLog()
	before := counted(t, "test_first")
	released := false
	onGoroutine(logger, "test_first", func() { panicsWith(errors.New("boom")) }, func() { released = true })

	assert.True(t, released, "what the goroutine held is given back")
	assert.Equal(t, before+1, counted(t, "test_first"))
	lines := logs.All()
	require.Len(t, lines, 1)
	assert.Equal(t, zapcore.ErrorLevel, lines[0].Level)
	assert.Equal(t, msgRecovered, lines[0].Message)
	fields := lines[0].ContextMap()
	assert.Equal(t, "test_first", fields["site"])
	assert.Equal(t, "boom", fields["panic"])
	assert.Contains(t, fields["stack"], "internal/panics.panicsWith", "the stack is the panic's")
}

func TestNoPanicNoRelease(t *testing.T) {
	logger, logs := newLog()
	released := false
	onGoroutine(logger, "test_none", func() {}, func() { released = true })
	assert.False(t, released)
	assert.Zero(t, logs.Len())
}

func TestRepeatedPanicsCostTheLogALineAtEachPowerOfTwo(t *testing.T) {
	logger, logs := newLog()
	before := counted(t, "test_repeated")
	for range 10 {
		onGoroutine(logger, "test_repeated", func() { panicsWith("again") })
	}
	assert.Equal(t, before+10, counted(t, "test_repeated"), "every panic is counted")
	type line struct {
		msg    string
		stack  bool
		panics int64
	}
	var got []line
	for _, l := range logs.All() {
		fields := l.ContextMap()
		_, stack := fields["stack"]
		n, _ := fields["panics"].(int64)
		got = append(got, line{l.Message, stack, n})
	}
	assert.Equal(t, []line{{msgRecovered, true, 0}, {msgRepeated, false, 2}, {msgRepeated, false, 4}, {msgRepeated, false, 8}}, got)
}

func TestEachLoggerHasTheFirstPanicOfASiteWithItsStack(t *testing.T) {
	first, firstLogs := newLog()
	second, secondLogs := newLog()
	onGoroutine(first, "test_loggers", func() { panicsWith("one") })
	onGoroutine(second, "test_loggers", func() { panicsWith("two") })
	for _, logs := range []*observer.ObservedLogs{firstLogs, secondLogs} {
		require.Equal(t, 1, logs.Len())
		assert.Equal(t, msgRecovered, logs.All()[0].Message, "another config's first")
	}
}

func TestTheUpstreamAbortingIsLoggedAtDebugAndNotCounted(t *testing.T) {
	logger, logs := newLog()
	before := counted(t, "test_abort")
	for range 3 {
		onGoroutine(logger, "test_abort", func() { panicsWith(http.ErrAbortHandler) })
	}
	assert.Equal(t, before, counted(t, "test_abort"), "no bug")
	lines := logs.All()
	require.Len(t, lines, 2, "the first, and the second (a power of two)")
	for _, l := range lines {
		assert.Equal(t, zapcore.DebugLevel, l.Level)
		assert.Equal(t, msgAborted, l.Message)
		assert.Equal(t, "test_abort", l.ContextMap()["site"])
		assert.NotContains(t, l.ContextMap(), "stack")
	}

	quiet, quietLogs := newLog()
	quiet = quiet.WithOptions(zap.IncreaseLevel(zapcore.InfoLevel))
	onGoroutine(quiet, "test_abort", func() { panicsWith(http.ErrAbortHandler) })
	assert.Zero(t, quietLogs.Len(), "nothing above debug")
}

func TestAPanicValueIsCutInTheLog(t *testing.T) {
	logger, logs := newLog()
	onGoroutine(logger, "test_long", func() { panicsWith(strings.Repeat("x", 10*maxValue)) })
	require.Equal(t, 1, logs.Len())
	assert.Len(t, logs.All()[0].ContextMap()["panic"], maxValue)
}

// Past maxKinds, the panics of a site are counted together whatever the
// logger; the kinds of loggers that are gone make room first.
func TestTheKindsCountedApartAreBounded(t *testing.T) {
	counts.Lock()
	clear(counts.n) // what the tests before counted
	counts.Unlock()
	func() {
		loggers := make([]*zap.Logger, 0, maxKinds)
		for range maxKinds {
			l, _ := newLog()
			loggers = append(loggers, l)
			Report(l, "test_bound", "fill")
		}
		late, lateLogs := newLog()
		later, laterLogs := newLog()
		Report(late, "test_bound_full", "one")
		Report(later, "test_bound_full", "two")
		assert.Equal(t, msgRecovered, lateLogs.All()[0].Message)
		assert.Equal(t, msgRepeated, laterLogs.All()[0].Message, "counted with the late logger's panic")
		runtime.KeepAlive(loggers)
	}()
	runtime.GC()
	latest, latestLogs := newLog()
	Report(latest, "test_bound_full", "three")
	assert.Equal(t, msgRecovered, latestLogs.All()[0].Message, "the loggers gone made room")
}
