// Package otlp reads the OTLP/HTTP trace exports Caddy's tracing sends,
// for the receivers of the tests and the benchmark: each export decoded
// with the OTLP protobuf types of the OpenTelemetry Go modules, as a
// collector would, and answered as a collector does.
package otlp

import (
	"compress/gzip"
	"io"
	"net/http"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receive decodes the export r carries and answers it: its spans, or an
// error (answered 400).
func Receive(w http.ResponseWriter, r *http.Request) ([]*tracepb.Span, error) {
	spans, err := decode(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, err
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
	return spans, nil
}

func decode(r *http.Request) ([]*tracepb.Span, error) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		return nil, err
	}
	var spans []*tracepb.Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			spans = append(spans, ss.GetSpans()...)
		}
	}
	return spans, nil
}
