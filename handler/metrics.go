package handler

import (
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

// The handler's metrics, in Caddy's registry: namespace caddy, subsystem mcp.
// They are created once per process and registered with every config load's
// registry (Caddy makes a new one each time), so that a reload does not
// reset a counter: they are the process's state, as reverse_proxy's
// upstreams_healthy is, and this file (with each feature's Collectors) is
// the one place they live. A config's registry, and the registration with
// it, goes with the config; the collectors and their series stay, bounded
// by the labels below, and hold nothing else (no goroutine, no config).
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

	cancellations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "cancellations_total",
		Help: "Requests the gateway told the upstream to stop (notifications/cancelled before MCP 2026-07-28, the closed stream from it on), by reason: deadline (a tool's timeout passed) or client_left (the client of a request holding guard places left).",
	}, []string{"reason"})

	resumes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "stream_resumes_total",
		Help: "GETs with Last-Event-ID the gateway sent to resume an upstream's event stream that broke while it owed responses, by outcome: streamed (the upstream replayed it) or refused (anything else: the responses owed were answered with an envelope).",
	}, []string{"outcome"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "request_duration_seconds",
		Help:    "Time from the handler receiving a POST to its response being written, by method.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method"})
)

// countResume counts the answer to a GET that resumes a broken stream:
// streamed, or refused.
func countResume(streamed bool) {
	outcome := "refused"
	if streamed {
		outcome = "streamed"
	}
	resumes.WithLabelValues(outcome).Inc()
}

// registerMetrics registers the handler's collectors with the registry of
// the config being loaded.
func registerMetrics(ctx caddy.Context) error {
	if err := promreg.Register(ctx, panics.Collectors()...); err != nil {
		return err
	}
	return promreg.Register(ctx, requestsTotal, envelopesTotal, requestDuration, cancellations, resumes)
}

// Outcomes of a request that was not answered with an envelope.
const (
	outcomeForwarded = "forwarded"
	outcomeCanceled  = "canceled"
)

// The per-method series are resolved once per label value, on first use, so
// the request path does no label hashing and no series exists before it has
// something to count. Like the collectors they cache, they are the
// process's: a series goes on counting across reloads, and there are at
// most as many as methods times outcomes.
var (
	forwardedCounters = promreg.ByLabel[prometheus.Counter](requestsTotal.MustCurryWith(prometheus.Labels{"outcome": outcomeForwarded}))
	durationObservers = promreg.ByLabel[prometheus.Observer](requestDuration)
	envelopeCounters  = promreg.ByLabel[prometheus.Counter](envelopesTotal)
	// outcomeCounters are, by outcome (canceled, or an envelope code: the
	// gateway's own, a bounded set), requestsTotal's series by method.
	outcomeCounters sync.Map // of *promreg.LabelCache[prometheus.Counter]
)

// outcomeCounter is requestsTotal's series of method and outcome.
func outcomeCounter(method, outcome string) prometheus.Counter {
	c, ok := outcomeCounters.Load(outcome)
	if !ok {
		c, _ = outcomeCounters.LoadOrStore(outcome, promreg.ByLabel[prometheus.Counter](requestsTotal.MustCurryWith(prometheus.Labels{"outcome": outcome})))
	}
	return c.(*promreg.LabelCache[prometheus.Counter]).Get(method)
}

// observe counts the exchange and its duration, once it is over.
func (h *Handler) observe(x *exchange, now time.Time) {
	method := x.MethodLabel()
	switch {
	case x.errorCode != "":
		outcomeCounter(method, x.errorCode).Inc()
	case x.canceled:
		outcomeCounter(method, outcomeCanceled).Inc()
	default:
		forwardedCounters.Get(method).Inc()
	}
	if x.Request.Method == http.MethodPost {
		durationObservers.Get(method).Observe(now.Sub(x.Start).Seconds())
	}
}
