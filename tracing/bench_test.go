package tracing

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
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
// One traced tools/call from end to end, as the handler takes it: its body
// parsed, its span started, two phases of admission, the body given the
// span's context for the upstream, the upstream's first byte, its
// response, the span ended and exported (to memory, synchronously), the
// metric observed. Caddy's HTTP span is opened once, outside the loop;
// the export is checked once (a copy of the spans is no cost of theirs).
func benchmarkMessageSpan(b *testing.B, size int) {
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
	buf := make([]byte, 0, len(body)+MetaBytes)
	first := true
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, batch, err := jsonrpc.Parse(body, one[:0], 100)
		if err != nil {
			b.Fatal(err)
		}
		x := &feature.Exchange{Request: r, Messages: msgs, Body: body, Batch: batch, Start: time.Now()}
		s := Start(x, nil)
		s.Phase("caddy.mcp.limits", time.Microsecond)
		s.Phase("caddy.mcp.guard", time.Microsecond)
		out, changed := s.AppendBody(buf[:0], body)
		if !changed || len(out) <= len(body) {
			b.Fatal("the body was not given the span's context")
		}
		s.Event("caddy.mcp.upstream.response", attribute.Int("http.response.status_code", 200))
		_, _ = s.Message(x, response)
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

func BenchmarkMessageSpan1KiB(b *testing.B)  { benchmarkMessageSpan(b, 1<<10) }
func BenchmarkMessageSpan64KiB(b *testing.B) { benchmarkMessageSpan(b, 64<<10) }
