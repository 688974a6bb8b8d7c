package reqbody

import (
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Gate stands between the answer to a request whose body streams (Stream)
// and the client: the first thing written waits for the verdict on the
// body, and once the body is refused everything written is dropped, so
// that the handler can answer as if it had read the whole body first.
type Gate struct {
	caddyhttp.ResponseWriterWrapper
	b *Stream
	// passed: the body was found valid, and writes go through; dropped: it
	// was refused, and writes go nowhere.
	passed, dropped bool
	discarded       http.Header
}

func (g *Gate) decide() bool {
	if !g.passed && !g.dropped {
		if g.b.Wait() == nil {
			g.passed = true
		} else {
			g.dropped = true
		}
	}
	return g.passed
}

func (g *Gate) Header() http.Header {
	if g.decide() {
		return g.ResponseWriter.Header()
	}
	if g.discarded == nil {
		g.discarded = make(http.Header)
	}
	return g.discarded
}

func (g *Gate) WriteHeader(status int) {
	if g.decide() {
		g.ResponseWriter.WriteHeader(status)
	}
}

func (g *Gate) Write(p []byte) (int, error) {
	if g.decide() {
		return g.ResponseWriter.Write(p)
	}
	return len(p), nil
}

func (g *Gate) Flush() {
	if g.decide() {
		if f, ok := g.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// ReadFrom keeps io.Copy from reaching around the gate.
func (g *Gate) ReadFrom(r io.Reader) (int64, error) {
	if g.decide() {
		return io.Copy(g.ResponseWriter, r)
	}
	return io.Copy(io.Discard, r)
}

// NewGate is the gate between w and the answer to the request whose body
// b streams.
func NewGate(w http.ResponseWriter, b *Stream) *Gate {
	return &Gate{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, b: b}
}
