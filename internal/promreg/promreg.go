// Package promreg registers Prometheus collectors with the registry of the
// Caddy config being loaded. Caddy makes a new registry per load; the
// collectors are created once per process and registered with each, so
// that counters survive reloads.
package promreg

import (
	"errors"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Register registers cs with ctx's registry; one already registered there
// is not an error.
func Register(ctx caddy.Context, cs ...prometheus.Collector) error {
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// LabelCache holds the series of a one-label vector by label value,
// resolved once per value on first use: the request path does no label
// hashing, and no series exists before it has something to count.
type LabelCache[M any] struct {
	vec interface {
		GetMetricWithLabelValues(...string) (M, error)
	}
	m sync.Map
}

// ByLabel is the cache of vec's series.
func ByLabel[M any](vec interface {
	GetMetricWithLabelValues(...string) (M, error)
}) *LabelCache[M] {
	return &LabelCache[M]{vec: vec}
}

// Get is the series of label.
func (c *LabelCache[M]) Get(label string) M {
	if v, ok := c.m.Load(label); ok {
		return v.(M)
	}
	metric, err := c.vec.GetMetricWithLabelValues(label)
	if err != nil {
		panic(err) // one label, always given: cannot happen
	}
	v, _ := c.m.LoadOrStore(label, metric)
	return v.(M)
}

// Other is the label of the values past a BoundedLabels' bound.
const Other = "_OTHER"
