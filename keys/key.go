package keys

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Key is the template of a rate limit's or a guard's key. A value is kept
// (as a bucket's or a guard's key) in at most MaxBytes: a longer one is
// kept as its SHA-256 digest.
type Key struct {
	Template
	// kind and name say whose key it is: "rate_limit" or "concurrency",
	// and the name.
	kind, name string
	// empty counts values that came out empty; warned is when that was
	// last logged (Unix nanoseconds).
	empty  prometheus.Counter
	warned atomic.Int64
	logger *zap.Logger
}

// NewKey checks and provisions the key template of kind's name.
func NewKey(kind, name, template string, logger *zap.Logger) (*Key, error) {
	t, err := Parse(template)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", template, err)
	}
	return &Key{Template: *t, kind: kind, name: name, empty: emptyKeys.WithLabelValues(kind, name), logger: logger}, nil
}

// emptyWarnEvery is the least time between two log lines about a key's
// empty values.
const emptyWarnEvery = time.Minute

// Eval returns the key of message m of x: the template's value, bounded.
// An empty value is counted, and logged once a minute at most: it puts
// every such request under one shared key.
func (k *Key) Eval(x *feature.Exchange, m *jsonrpc.Message) string {
	v := k.Value(x, m)
	if v == "" {
		k.empty.Inc()
		now := x.Start.UnixNano()
		if last := k.warned.Load(); now-last >= int64(emptyWarnEvery) && k.warned.CompareAndSwap(last, now) {
			k.logger.Warn("a key template gave an empty value: requests without one share a single key",
				zap.String(k.kind, k.name), zap.String("key", k.Text))
		}
	}
	return Bound(v)
}

// MaxBytes bounds the bytes a key value keeps in memory.
const MaxBytes = 128

// Bound returns the key kept for the value v: v itself, or, when v is
// longer than MaxBytes (or could be mistaken for a digest), "sha256:" and
// the hex SHA-256 of v (feature.BoundKey).
func Bound(v string) string { return feature.BoundKey(v, MaxBytes) }

// Shown is a key as the log and the status API show it without log_key
// (feature.ShownKey).
func Shown(k string) string { return feature.ShownKey(k) }

// emptyKeys counts the messages whose key came out empty.
var emptyKeys = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "empty_keys_total",
	Help: "Messages whose rate-limit or guard key template gave an empty value (they share one key), by kind (rate_limit or concurrency) and name.",
}, []string{"kind", "name"})

// Collectors are the metrics of keys, for a config's registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{emptyKeys} }
