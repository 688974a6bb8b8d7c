package tracing

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Run with:
//
//	go test -run '^$' -bench MessageSpan -benchmem ./tracing/
//
// One traced tools/call from end to end, as the handler takes it, through
// the feature's tracer: its body parsed, its span started, two phases of
// admission, the body given the span's context for the upstream, the
// upstream's first byte, its response, the span ended and exported (to
// memory, synchronously), the metric observed. Caddy's HTTP span is
// opened once, outside the loop; the export is checked once (a copy of
// the spans is no cost of theirs). The Only benchmarks parse the body once,
// outside the loop: what is left is the span's own cost, since the core
// parses the body whether the request is traced or not.
func benchmarkMessageSpan(b *testing.B, size int, parse bool) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, httpSpan := tp.Tracer("caddy").Start(context.Background(), "http")
	b.Cleanup(func() { httpSpan.End() })

	body := wire.ToolsCallOfSize(size)
	r := httptest.NewRequestWithContext(ctx, "POST", "/mcp", strings.NewReader(""))
	r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	r.Header.Set("Mcp-Session-Id", "0123456789abcdef0123456789abcdef")
	response := []byte(`{"jsonrpc":"2.0","id":"call-7f3a9c","result":{"content":[{"type":"text","text":"ok"}]}}`)
	var one [1]jsonrpc.Message
	msgs, batch, err := jsonrpc.Parse(body, one[:0], 100)
	if err != nil {
		b.Fatal(err)
	}
	var tr feature.Tracer = tracer{newTools()}
	buf := make([]byte, 0, len(body)+feature.SpliceRoom)
	first := true
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if parse {
			if msgs, batch, err = jsonrpc.Parse(body, one[:0], 100); err != nil {
				b.Fatal(err)
			}
		}
		x := &feature.Exchange{Request: r, Messages: msgs, Body: body, Batch: batch, Start: time.Now()}
		s := tr.Start(x)
		s.Phase(feature.PhaseAdmission, time.Microsecond)
		s.Phase(feature.PhaseEntry, time.Microsecond)
		out, changed := s.AppendBody(buf[:0], body)
		if !changed || len(out) <= len(body) {
			b.Fatal("the body was not given the span's context")
		}
		s.Upstream(200)
		_, _ = s.Answer().Message(x, response)
		s.Finish(time.Now())
		if first {
			if n := len(exp.GetSpans()); n != 1 {
				b.Fatalf("%d spans exported", n)
			}
			first = false
		}
		exp.Reset()
	}
}

func BenchmarkMessageSpan1KiB(b *testing.B)      { benchmarkMessageSpan(b, 1<<10, true) }
func BenchmarkMessageSpan64KiB(b *testing.B)     { benchmarkMessageSpan(b, 64<<10, true) }
func BenchmarkMessageSpanOnly1KiB(b *testing.B)  { benchmarkMessageSpan(b, 1<<10, false) }
func BenchmarkMessageSpanOnly64KiB(b *testing.B) { benchmarkMessageSpan(b, 64<<10, false) }
