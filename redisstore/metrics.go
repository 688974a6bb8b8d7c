package redisstore

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

// The store's metrics, in Caddy's registry beside the handler's. The redis
// label is the configured addresses (credentials removed), a value the
// configuration bounds.
var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "store_decisions_total",
		Help: "Rate-limit decisions asked of a Redis store, by where they were made: redis, error (Redis failed or timed out; decided as on_error says), down (Redis known down; decided as on_error says without asking it).",
	}, []string{"redis", "outcome"})

	latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "store_latency_seconds",
		Help:    "Time one decision took in Redis, failures included.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25},
	}, []string{"redis"})

	up = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "store_up",
		Help: "1 while the Redis store answers, 0 while decisions are made without it.",
	}, []string{"redis"})
)

// registerMetrics registers the collectors with the config's registry.
func registerMetrics(ctx caddy.Context) error {
	return promreg.Register(ctx, decisions, latency, up)
}
