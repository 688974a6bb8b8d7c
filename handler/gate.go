package handler

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// serveStreamed admits a call on its head. A call refused is read whole
// and answered here; an admitted one is forwarded as its body streams,
// through the gate (reqbody.Gate). A body refused once it was streaming is answered as if
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
	g := reqbody.NewGate(w, b)
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
