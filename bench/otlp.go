package main

import (
	"log"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/caddymcp/caddy-mcp/internal/otlp"
)

// traceSink is where the traced configurations' Caddy processes export
// their spans: an OTLP/HTTP endpoint on loopback that decodes each export,
// as a collector would, counts its spans and keeps nothing. The Caddy
// processes find it through the standard OpenTelemetry variables, set in
// the benchmark's environment before they start.
type traceSink struct {
	srv   *http.Server
	spans atomic.Int64
}

func startTraceSink() (*traceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &traceSink{}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.export)}
	go func() { _ = s.srv.Serve(ln) }()
	for k, v := range map[string]string{
		"OTEL_TRACES_EXPORTER":               "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL":        "http/protobuf",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://" + ln.Addr().String() + "/v1/traces",
		"OTEL_METRICS_EXPORTER":              "none",
		"OTEL_LOGS_EXPORTER":                 "none",
	} {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	log.Printf("OTLP trace sink on %s", ln.Addr())
	return s, nil
}

func (s *traceSink) export(w http.ResponseWriter, r *http.Request) {
	if spans, err := otlp.Receive(w, r); err == nil {
		s.spans.Add(int64(len(spans)))
	}
}

// Close stops the sink, saying how many spans it received.
func (s *traceSink) Close() {
	log.Printf("OTLP trace sink received %d spans", s.spans.Load())
	_ = s.srv.Close()
}
