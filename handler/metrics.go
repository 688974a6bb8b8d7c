package handler

import (
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddymcp/caddy-mcp/limits"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
	"github.com/caddymcp/caddy-mcp/validate"
)

// The handler's metrics, in Caddy's registry: namespace caddy, subsystem mcp.
// They are created once per process and registered with every config load's
// registry (Caddy makes a new one each time).
//
// Label values are bounded by construction: a method label is one of the
// MCP methods (feature.Methods; anything else is "other"), an outcome is "forwarded",
// "canceled" or one of the gateway's envelope codes, and limit and guard
// names come from the configuration. Tool names and session ids are left
// out: clients choose them freely, and each new value would be a new series.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "requests_total",
		Help: "Requests the mcp handler saw, by JSON-RPC method and outcome (forwarded, canceled, or the envelope code it answered with).",
	}, []string{"method", "outcome"})

	envelopesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "envelopes_total",
		Help: "Envelopes the gateway answered with, by code.",
	}, []string{"code"})

	queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "queue_wait_seconds",
		Help:    "Time requests waited for a place in a concurrency guard, by method.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"method"})

	cancellations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "cancellations_total",
		Help: "Requests the gateway told the upstream to stop (notifications/cancelled before MCP 2026-07-28, the closed stream from it on), by reason: deadline (a tool's timeout passed) or client_left (the client of a request holding guard places left).",
	}, []string{"reason"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "request_duration_seconds",
		Help:    "Time from the handler receiving a POST to its response being written, by method.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method"})

	stateCollector = poolCollector{
		inflight: prometheus.NewDesc("caddy_mcp_inflight", "Requests holding a place in the concurrency guards of a name.", []string{"guard"}, nil),
		queued:   prometheus.NewDesc("caddy_mcp_queued", "Requests waiting in the concurrency guards of a name.", []string{"guard"}, nil),
	}
)

// registerMetrics registers the handler's collectors with the registry of
// the config being loaded.
func registerMetrics(ctx caddy.Context) error {
	if err := promreg.Register(ctx, toolpolicy.Collectors()...); err != nil {
		return err
	}
	if err := promreg.Register(ctx, contract.Collectors()...); err != nil {
		return err
	}
	if err := promreg.Register(ctx, limits.Collectors()...); err != nil {
		return err
	}
	if err := promreg.Register(ctx, keys.Collectors()...); err != nil {
		return err
	}
	if err := promreg.Register(ctx, validate.Collectors(liveCatalog)...); err != nil {
		return err
	}
	return promreg.Register(ctx, requestsTotal, envelopesTotal, queueWait, requestDuration, sessionTokens, cancellations, stateCollector)
}

// poolCollector reads the live guards at scrape time, so that
// the request path pays nothing for these gauges.
type poolCollector struct {
	inflight, queued *prometheus.Desc
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inflight
	ch <- c.queued
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	type counts struct{ active, queued int }
	byGuard := make(map[string]counts)
	guards.Range(func(_, v any) bool {
		gs := v.(guardSet)
		t := gs.Totals()
		n := byGuard[gs.name]
		byGuard[gs.name] = counts{n.active + t.Active, n.queued + t.Queued}
		return true
	})
	for name, n := range byGuard {
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(n.active), name)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(n.queued), name)
	}
}

// Label values for exchanges that are not one message of a known method.
const (
	methodOther    = "other"
	methodBatch    = "batch"
	methodResponse = "response"
	methodInvalid  = "invalid"

	outcomeForwarded = "forwarded"
	outcomeCanceled  = "canceled"
)

// The per-method series are resolved once per label value, on first use, so
// the request path does no label hashing and no series exists before it has
// something to count.
var (
	forwardedCounters  = labelCache[prometheus.Counter]{vec: requestsTotal.MustCurryWith(prometheus.Labels{"outcome": outcomeForwarded})}
	durationObservers  = labelCache[prometheus.Observer]{vec: requestDuration}
	queueWaitObservers = labelCache[prometheus.Observer]{vec: queueWait}
	methodNames        = make(map[string]string)
)

func init() {
	for _, m := range feature.Methods {
		methodNames[m] = m
	}
}

// labelCache holds the series of a one-label vector by label value.
type labelCache[M any] struct {
	vec interface {
		GetMetricWithLabelValues(...string) (M, error)
	}
	m sync.Map
}

func (c *labelCache[M]) get(label string) M {
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

// observe counts the exchange and its duration, once it is over.
func (h *Handler) observe(x *exchange, now time.Time) {
	method := x.methodLabel()
	switch {
	case x.errorCode != "":
		requestsTotal.WithLabelValues(method, x.errorCode).Inc()
	case x.canceled:
		requestsTotal.WithLabelValues(method, outcomeCanceled).Inc()
	default:
		forwardedCounters.get(method).Inc()
	}
	if x.Request.Method == http.MethodPost {
		durationObservers.get(method).Observe(now.Sub(x.Start).Seconds())
	}
}

// methodLabel is the exchange's method as a bounded label value.
func (x *exchange) methodLabel() string {
	switch x.Request.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete:
		return x.Request.Method
	default:
		return methodOther
	}
	switch {
	case x.Batch:
		return methodBatch
	case len(x.Messages) == 0 || x.Messages[0].Kind == jsonrpc.Invalid:
		return methodInvalid
	case x.Messages[0].Kind == jsonrpc.Response:
		return methodResponse
	}
	if name, ok := methodNames[string(x.Messages[0].Method)]; ok {
		return name
	}
	return methodOther
}
