package results

import (
	"context"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/keys"
)

// What a kept result leaves behind: a log line when it is kept and one
// for each read of it (the audit of who read what), the pages counted by
// outcome, and, where Caddy traces, a link from each read's span to the
// span of the call that made the result (its trace context is the
// result's note in the store).

// The outcomes of a read, as the metric labels them.
const (
	pageRead     = "read"
	pageNotFound = "not_found"
	pageFailed   = "failed"
)

// pageReads counts the reads of kept results, by outcome: read (a page
// given), not_found (NOT_FOUND: expired, another caller's, made up) or
// failed (the storage failed). pageBytes counts the text given.
var (
	pageReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "result_pages_total",
		Help: "Reads (resources/read) of tool results kept whole, by outcome: read (a page given), not_found (expired, another caller's or made up) or failed (the storage failed).",
	}, []string{"outcome"})
	pageBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcp", Name: "result_page_bytes_total",
		Help: "Bytes of text given in the pages of tool results kept whole.",
	})
)

// callSpan is the span of x's message (feature.SpanVar), nil when it is
// not traced.
func callSpan(x *feature.Exchange) trace.Span {
	if x.Request == nil {
		return nil
	}
	span, _ := caddyhttp.GetVar(x.Request.Context(), feature.SpanVar).(trace.Span)
	return span
}

var propagator = propagation.TraceContext{}

// traceNote is the note a result keeps of the call's span: its W3C
// traceparent; nil when the call is not traced.
func traceNote(span trace.Span) []byte {
	if span == nil || !span.SpanContext().IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(trace.ContextWithSpanContext(context.Background(), span.SpanContext()), c)
	return []byte(c["traceparent"])
}

// traceRead names on span, a read's, the page read (mcp.resource.uri: the
// gateway's own link, which names no user's file, unlike the URIs the
// tracing leaves out), and links it to the span of the call whose note is
// note.
func traceRead(span trace.Span, uri string, note []byte) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("mcp.resource.uri", uri))
	if len(note) == 0 {
		return
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(note)})
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		span.AddLink(trace.Link{SpanContext: sc})
	}
}

// ownerField names an owner (ownerOf) in a log line: the principal's
// subject, or the digest of the session's id (a credential). The id is
// the client's to choose: it is digested even when it looks like a digest
// (feature.BoundKey), never shown in part.
func ownerField(owner string) zap.Field {
	kind, rest, _ := strings.Cut(owner, "\x00")
	if kind == "session" {
		return zap.String("session", keys.Shown(feature.BoundKey(rest, 0)))
	}
	_, subject, _ := strings.Cut(rest, "\x00")
	return zap.String("subject", feature.Clip(subject))
}

// logKept logs a result kept whole.
func (b *Budgets) logKept(tool, id string, size int64, owner string) {
	b.logger.Info("a tool's result over its budget was kept whole, to be read in pages",
		zap.String("tool", feature.Clip(tool)), zap.String("result", id), zap.Int64("text_bytes", size), ownerField(owner))
}

// logRead logs a read of a result, and counts it: outcome and, for a
// page given, its offset and bytes.
func (b *Budgets) logRead(outcome, id string, from int64, n int, owner string) {
	pageReads.WithLabelValues(outcome).Inc()
	switch outcome {
	case pageRead:
		pageBytes.Add(float64(n))
		b.logger.Info("a page of a kept tool result was read",
			zap.String("result", id), zap.Int64("from", from), zap.Int("bytes", n), ownerField(owner))
	case pageNotFound:
		b.logger.Info("a read of a kept tool result was answered NOT_FOUND: expired, another caller's, or not a link the gateway gave",
			zap.String("result", feature.Clip(id)), ownerField(owner))
	}
}
