package mcptest

import (
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/caddymcp/caddy-mcp/internal/otlp"
)

// OTLPReceiver is an OTLP/HTTP trace receiver on a loopback port: it
// decodes each export with the OTLP protobuf types of the OpenTelemetry
// Go modules, and keeps the spans. One serves the whole test process:
// Caddy's tracing reads its exporter's address from the environment
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) once per tracer provider, which
// lives as long as a config with tracing is loaded. Tests tell their
// spans apart by trace id.
type OTLPReceiver struct {
	URL     string
	mu      sync.Mutex
	spans   []*Span
	arrived chan struct{} // closed and replaced at each export
}

// Span is one span the receiver was sent.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attributes                    map[string]string
	Events                        []Event
	Links                         []string // the span ids linked to
	StatusError                   bool
	StatusMessage                 string
}

// Event is a span's event.
type Event struct {
	Name       string
	Attributes map[string]string
}

var (
	otlpOnce sync.Once
	receiver *OTLPReceiver
)

// TraceReceiver is the process's OTLP receiver, started on first use, with
// the environment set for Caddy's tracing to export to it at once
// (a batch delay of 10 ms).
func TraceReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	otlpOnce.Do(func() {
		receiver = &OTLPReceiver{arrived: make(chan struct{})}
		srv := httptest.NewServer(http.HandlerFunc(receiver.export))
		receiver.URL = srv.URL
		for k, v := range map[string]string{
			"OTEL_TRACES_EXPORTER":               "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL":        "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/v1/traces",
			"OTEL_BSP_SCHEDULE_DELAY":            "10",
			"OTEL_METRICS_EXPORTER":              "none",
			"OTEL_LOGS_EXPORTER":                 "none",
		} {
			if err := os.Setenv(k, v); err != nil {
				t.Fatal(err)
			}
		}
	})
	return receiver
}

func (o *OTLPReceiver) export(w http.ResponseWriter, r *http.Request) {
	spans, err := otlp.Receive(w, r)
	if err != nil {
		return
	}
	got := make([]*Span, len(spans))
	for i, s := range spans {
		got[i] = spanOf(s)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spans = append(o.spans, got...)
	close(o.arrived)
	o.arrived = make(chan struct{})
}

func spanOf(s *tracepb.Span) *Span {
	sp := &Span{
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
		Attributes:  attributes(s.GetAttributes()),
		StatusError: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR, StatusMessage: s.GetStatus().GetMessage(),
	}
	for _, e := range s.GetEvents() {
		sp.Events = append(sp.Events, Event{Name: e.GetName(), Attributes: attributes(e.GetAttributes())})
	}
	for _, l := range s.GetLinks() {
		sp.Links = append(sp.Links, hex.EncodeToString(l.GetSpanId()))
	}
	return sp
}

// attributes are kvs with their values as text.
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = strconv.FormatFloat(v.GetDoubleValue(), 'g', -1, 64)
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// Trace waits until the spans of trace traceID include one named each of
// names, and returns them all.
func (o *OTLPReceiver) Trace(t testing.TB, traceID string, names ...string) []*Span {
	t.Helper()
	return o.Until(t, traceID, func(spans []*Span) bool {
		for _, n := range names {
			if !slices.ContainsFunc(spans, func(s *Span) bool { return s.Name == n }) {
				return false
			}
		}
		return true
	})
}

// Any waits until a span named name arrives, of any trace, and reports
// whether one did before the failsafe.
func (o *OTLPReceiver) Any(t testing.TB, name string) bool {
	t.Helper()
	failsafe := time.NewTimer(time.Minute)
	defer failsafe.Stop()
	for {
		o.mu.Lock()
		found := slices.ContainsFunc(o.spans, func(s *Span) bool { return s.Name == name })
		arrived := o.arrived
		o.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-arrived:
		case <-failsafe.C:
			return false
		}
	}
}

// Until waits until the spans of trace traceID are complete by done's
// judgment, and returns them. A trace that never completes fails the test
// after a minute: a failsafe, not a measure (spans are exported every
// 10 ms).
func (o *OTLPReceiver) Until(t testing.TB, traceID string, done func([]*Span) bool) []*Span {
	t.Helper()
	failsafe := time.NewTimer(time.Minute)
	defer failsafe.Stop()
	for {
		o.mu.Lock()
		var spans []*Span
		for _, s := range o.spans {
			if s.TraceID == traceID {
				spans = append(spans, s)
			}
		}
		arrived := o.arrived
		o.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-arrived:
		case <-failsafe.C:
			t.Fatalf("mcptest: trace %s never completed; it has %d spans", traceID, len(spans))
		}
	}
}
