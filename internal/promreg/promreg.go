// Package promreg registers Prometheus collectors with the registry of the
// Caddy config being loaded. Caddy makes a new registry per load; the
// collectors are created once per process and registered with each, so
// that counters survive reloads.
package promreg

import (
	"errors"

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
