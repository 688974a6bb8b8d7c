// Package panics recovers the panics of the gateway's own goroutines and
// timer callbacks. net/http recovers a panic only on the goroutines it
// runs itself: on a goroutine the gateway starts (go, time.AfterFunc,
// context.AfterFunc), a panic ends the process, and every site Caddy
// serves with it. So each of them defers Recover first, naming its site:
// the panic ends there, what the goroutine held is given back, and the
// panic is logged and counted.
//
// http.ErrAbortHandler is how reverse_proxy gives up an answer it began
// and cannot finish (the upstream broke it). On a request the gateway
// sends itself through the route (a notifications/cancelled), it is the
// upstream's doing, not a bug: it is logged at debug and not counted. Any
// other panic is a bug, logged at error with its value and its stack, and
// counted in caddy_mcp_panics_recovered_total by site.
//
// A panic that repeats costs the log a bounded number of lines: the first
// of each site is logged with its stack, the next ones only when their
// count reaches a power of two (the 2nd, 4th, 8th...), with the count,
// per logger (a config's). Unlike internal/logsample, this needs no timer,
// which would be one more goroutine of its own to recover.
//
// There is no Go(f) that starts a goroutine: a goroutine started where it
// is needed keeps its starter's name in stack dumps ("created by").
package panics

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"weak"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Bounds of what a panic costs the log: the bytes of its value and of its
// stack, and the kinds of panics counted apart (beyond it, the panics of a
// site are counted together, whatever the logger).
const (
	maxValue = 1 << 10
	maxStack = 64 << 10
	maxKinds = 1024
)

// Messages of the log lines, which operators may search for.
const (
	msgRecovered = "recovered a panic"
	msgRepeated  = "recovered more panics"
	msgAborted   = "the upstream broke its answer to a request the gateway sent itself"
)

var recovered = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "panics_recovered_total",
	Help: "Panics recovered on the gateway's own goroutines and timers, by site: each is a bug, which would otherwise have stopped Caddy (the upstream breaking its answer to a request the gateway sent itself is not counted).",
}, []string{"site"})

// Collectors are the package's metrics, to register with each config's
// registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{recovered} }

// Recover, deferred directly (defer panics.Recover(...)), ends a panic of
// its goroutine: release is called, then the panic is reported (Report).
// site names where it was recovered, in a word; it is a metric's label, so
// it must come from a fixed set (a constant). Deferred first, it runs last:
// the goroutine's other deferred calls have given back what they held.
func Recover(logger *zap.Logger, site string, release ...func()) {
	v := recover()
	if v == nil {
		return
	}
	for _, f := range release {
		f()
	}
	Report(logger, site, v)
}

// Report logs and counts v, a panic recovered at site. Call it from the
// deferred function that recovered v, so that the stack it logs is the
// panic's. A nil logger is Caddy's default logger.
func Report(logger *zap.Logger, site string, v any) {
	// A logger that panics costs its line, not the process: there is
	// nowhere else to say it.
	defer func() { _ = recover() }()
	if logger == nil {
		logger = caddy.Log()
	}
	if v == http.ErrAbortHandler {
		if n := note(logger, site, true); logged(n) {
			if ce := logger.Check(zapcore.DebugLevel, msgAborted); ce != nil {
				ce.Write(zap.String("site", site), zap.Int64("times", n))
			}
		}
		return
	}
	recovered.WithLabelValues(site).Inc()
	n := note(logger, site, false)
	if !logged(n) {
		return
	}
	fields := []zap.Field{zap.String("site", site), zap.String("panic", clip(fmt.Sprint(v), maxValue))}
	msg := msgRecovered
	if n == 1 {
		fields = append(fields, zap.String("stack", clip(string(debug.Stack()), maxStack)))
	} else {
		msg = msgRepeated
		fields = append(fields, zap.Int64("panics", n))
	}
	logger.Error(msg, fields...)
}

// logged reports whether the nth panic of a kind is logged: the first,
// and those whose count is a power of two.
func logged(n int64) bool { return n&(n-1) == 0 }

// kind is what tells panics apart for the log: the logger they are
// logged to (held weakly: a config unloaded lets its logger go), their
// site, and whether they are the upstream's aborts.
type kind struct {
	logger weak.Pointer[zap.Logger]
	site   string
	abort  bool
}

// counts are the panics recovered in the process, by kind. A panic would
// have ended the process, so it is counted for the process, as the metric
// counts it.
var counts = struct {
	sync.Mutex
	n map[kind]int64
}{n: make(map[kind]int64)}

// note counts a panic of site logged to logger, and returns how many of
// its kind there were.
func note(logger *zap.Logger, site string, abort bool) int64 {
	k := kind{logger: weak.Make(logger), site: site, abort: abort}
	counts.Lock()
	defer counts.Unlock()
	if _, held := counts.n[k]; !held && len(counts.n) >= maxKinds {
		for old := range counts.n {
			if old.logger != (weak.Pointer[zap.Logger]{}) && old.logger.Value() == nil {
				delete(counts.n, old)
			}
		}
		if len(counts.n) >= maxKinds {
			k.logger = weak.Pointer[zap.Logger]{}
		}
	}
	counts.n[k]++
	return counts.n[k]
}

// clip cuts s to at most max bytes.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:max]
}
