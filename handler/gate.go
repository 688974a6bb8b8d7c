package handler

import (
	"io"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// streamGate stands between a streamed request's answer and the client:
// the first thing written waits for the verdict on the body, and once the
// body is refused everything written is dropped, so that the handler can
// answer as if it had read the whole body first.
type streamGate struct {
	caddyhttp.ResponseWriterWrapper
	b *reqbody.Stream
	// passed: the body was found valid, and writes go through; dropped: it
	// was refused, and writes go nowhere.
	passed, dropped bool
	discarded       http.Header
}

func (g *streamGate) decide() bool {
	if !g.passed && !g.dropped {
		if g.b.Wait() == nil {
			g.passed = true
		} else {
			g.dropped = true
		}
	}
	return g.passed
}

func (g *streamGate) Header() http.Header {
	if g.decide() {
		return g.ResponseWriter.Header()
	}
	if g.discarded == nil {
		g.discarded = make(http.Header)
	}
	return g.discarded
}

func (g *streamGate) WriteHeader(status int) {
	if g.decide() {
		g.ResponseWriter.WriteHeader(status)
	}
}

func (g *streamGate) Write(p []byte) (int, error) {
	if g.decide() {
		return g.ResponseWriter.Write(p)
	}
	return len(p), nil
}

func (g *streamGate) Flush() {
	if g.decide() {
		if f, ok := g.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// ReadFrom keeps io.Copy from reaching around the gate.
func (g *streamGate) ReadFrom(r io.Reader) (int64, error) {
	if g.decide() {
		return io.Copy(g.ResponseWriter, r)
	}
	return io.Copy(io.Discard, r)
}

// serveStreamed admits a call on its head. A call refused is read whole
// and answered here; an admitted one is forwarded as its body streams,
// through the gate. A body refused once it was streaming is answered as if
// it had been read whole first, with the tokens and places its head took
// given back.
func (h *Handler) serveStreamed(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) error {
	b := x.stream
	if ref := h.admitCall(x); ref != nil {
		err := b.Rest()
		x.pooled = b.Buffer()
		if err == nil {
			return h.refuseWith(w, x, ref)
		}
		x.undo(time.Now(), false)
		x.answering = true
		return h.refuseBody(w, x, err)
	}
	b.Start()
	g := &streamGate{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, b: b}
	err := func() error {
		defer b.Wait() // however forward ends, the body is not read past it
		return h.forward(g, x, next)
	}()
	x.pooled = b.Buffer()
	refused := b.Wait()
	if refused == nil {
		return err
	}
	x.undo(time.Now(), false)
	x.answering = true
	return h.refuseBody(w, x, refused)
}

// dropsAnswers reports whether an answer given now would be dropped: the
// body streams and was refused, and its refusal is not the answer being
// given. It waits for the verdict.
func (x *exchange) dropsAnswers() bool {
	return x.stream != nil && !x.answering && x.stream.Wait() != nil
}
