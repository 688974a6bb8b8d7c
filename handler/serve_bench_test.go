package handler

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// discardWriter is a response writer that keeps nothing, so that a
// benchmark measures the handler, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// benchServe measures ServeHTTP for one request shape, with a next handler
// that reads the body, closes it as Caddy's transport does, and answers
// like an upstream. Building the request is left out of the timing as far
// as possible.
func benchServe(b *testing.B, h *Handler, body string) {
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, upstreamAnswer)
		return err
	})
	w := &discardWriter{h: make(http.Header)}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		r := post(body)
		clear(w.h)
		b.StartTimer()
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkServeForwardedInspectOnly(b *testing.B) {
	benchServe(b, provisionB(b, &Handler{}), toolsCall1KiB())
}

func BenchmarkServeForwardedWithLimitsAndGuard(b *testing.B) {
	h := provisionB(b, &Handler{
		FeaturesRaw: features(b, "rate_limits", map[string]*RateLimit{
			"a": {Rate: "1000000/1s"},
			"b": {Rate: "1000000/1s", Key: "{http.mcp.tool}"},
		},
			"concurrency", &Concurrency{Name: "bench", Max: 1000}),
	})
	benchServe(b, h, toolsCall1KiB())
}

func BenchmarkServeDenied(b *testing.B) {
	h := provisionB(b, &Handler{FeaturesRaw: features(b, "rate_limits", map[string]*RateLimit{"none": {Rate: "1/1h", Burst: 1}})})
	benchServe(b, h, toolsCall1KiB())
}

// BenchmarkServeDenied64KiB is a call refused by a limit, read whole, and
// streaming (over a stream_above of 16 KiB): refused on its head, it is
// read whole on the request's goroutine, in buffers that grow as it
// arrives and go back to the pool when the exchange is over, and the
// upstream side never starts.
func BenchmarkServeDenied64KiB(b *testing.B) {
	for _, mode := range []string{"whole", "streamed"} {
		b.Run(mode, func(b *testing.B) {
			h := &Handler{FeaturesRaw: features(b, "rate_limits", map[string]*RateLimit{"none": {Rate: "1/1h", Burst: 1}})}
			if mode == "streamed" {
				h.StreamAbove = 16 << 10
			}
			benchServe(b, provisionB(b, h), toolsCallOf(64<<10))
		})
	}
}

func toolsCall1KiB() string {
	var arg bytes.Buffer
	for arg.Len() < 900 {
		arg.WriteString("lorem ipsum dolor sit amet ")
	}
	return `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search","arguments":{"query":"` + arg.String() + `"}}}`
}

func provisionB(b *testing.B, h *Handler) *Handler {
	b.Helper()
	ctx, cancel := newCaddyContext()
	b.Cleanup(cancel)
	h.logger = zap.NewNop() // before Provision, which hands it to what logs
	if err := h.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// BenchmarkServeForwardedValidate is BenchmarkServeForwardedInspectOnly with
// validate on and the tool's schema learned, with the bench's echo body
// (prose with escapes).
func BenchmarkServeForwardedValidate(b *testing.B) {
	h := provisionB(b, &Handler{FeaturesRaw: features(b, "validate", &Validate{})})
	body := echoCall1KiB()
	const list = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","description":"Echoes text.","inputSchema":{"type":"object","properties":{"text":{"type":"string","description":"the text to echo back"}},"required":["text"],"additionalProperties":false}}]}}`
	lists := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, list)
		return err
	})
	if err := h.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), lists); err != nil {
		b.Fatal(err)
	}
	if w := httptest.NewRecorder(); h.ServeHTTP(w, post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`), lists) != nil || !strings.Contains(w.Body.String(), "validation_error") {
		b.Fatal("the tool's schema was not learned")
	}
	benchServe(b, h, body)
}

func BenchmarkServeForwardedInspectOnlyEcho(b *testing.B) {
	benchServe(b, provisionB(b, &Handler{}), echoCall1KiB())
}

func echoCall1KiB() string {
	const head = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`
	const tail = `"}}}`
	const prose = `The gateway reads every call before the server does; it must not be what the user waits for. \"Quoted,\" she said.\n`
	var s strings.Builder
	s.WriteString(head)
	for s.Len() < 1024-len(tail)-len(prose) {
		s.WriteString(prose)
	}
	s.WriteString(tail)
	return s.String()
}

// BenchmarkServeForwardedLarge is an admitted call of each size, read whole
// before it goes on, and streamed to the upstream as it arrives: what
// streaming costs in CPU where the body is all there at once (loopback).
func BenchmarkServeForwardedLarge(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		body := toolsCallOf(size)
		for _, mode := range []string{"whole", "streamed"} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, mode), func(b *testing.B) {
				h := &Handler{StreamAbove: 16 << 10}
				if mode == "whole" {
					h.StreamAbove = 64 << 20
				}
				benchServe(b, provisionB(b, h), body)
			})
		}
	}
}

// toolsCallOf is a tools/call of prose, size bytes long.
func toolsCallOf(size int) string {
	const head, tail = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search","arguments":{"query":"`, `"}}}`
	return head + strings.Repeat("lorem ipsum dolor sit amet ", (size-len(head)-len(tail))/27) + tail
}
