package handler

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// Forwarding: the request goes to the next handler (reverse_proxy), and its
// answer comes back through an upstreamWatch, which passes everything
// through as it is written, except what the gateway must answer for the
// upstream: an error status whose body is not JSON-RPC, a proxy error
// returned before anything was written, and an event stream that ended
// before the response it owed.

// maxHeldBody bounds the error body held back from the client while the
// handler decides whether it is the upstream's own JSON-RPC answer (passed
// through) or an error page (replaced by an envelope). A longer body is
// passed through as it is.
const maxHeldBody = 64 << 10

// forward hands the request to the next handler, or the upstream route a
// router names (route.go).
func (h *Handler) forward(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) error {
	next, ok, err := h.route(w, x, next)
	if !ok {
		return err
	}
	return h.forwardTo(w, x, next)
}

// forwardTo hands the request to next and settles what the upstream could
// not say for itself.
func (h *Handler) forwardTo(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) (err error) {
	x.forwarded = true
	u := &x.watch
	*u = upstreamWatch{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, h: h, x: x, keepaliveEvery: time.Duration(h.SSEKeepalive)}
	if u.openHooks(h.responders, x.undos) {
		defer func() { u.hooks.end(&x.Exchange, u.ending(err)) }()
		u.mayReopen(x)
	}
	up := x.Request
	var abandon *abandonment
	ctx := up.Context()
	if grace := x.linger(); grace > 0 && !(h.UpstreamCancelsOnClose && x.Era.ClosingCancels()) {
		// The request holds places in the guard, and its upstream may go
		// on running it when the client leaves (before MCP 2026-07-28
		// closing the connection does not cancel a call, and from it on
		// servers do not all stop). The upstream request is cut loose from
		// the client's, and its answer read to its end, into nothing once
		// the client is gone, for as long as abandon.go says.
		abandon, ctx = h.detach(x, u, next, grace)
		u.drain = true
	}
	if abandon != nil || len(h.deadlines) > 0 {
		// What the transport did with the request: a call cut at its
		// deadline is cancelled upstream only once it got there.
		ctx = u.delivery.trace(ctx)
	}
	if ctx != up.Context() {
		up = up.WithContext(ctx)
	}
	x.traceUpstream(up)
	x.rewrite(h.rewriters, up)
	if d, cut, cancel := h.startDeadline(x, up); d != nil {
		u.deadline, up = d, cut
		defer cancel(nil)
		defer d.timer.Stop()
	}
	u.upstream = up
	if abandon != nil {
		abandon.watch()
		defer abandon.done()
	}
	defer func() {
		if v := recover(); v != nil {
			err = h.settleBroken(v, x, u, next)
		}
	}()
	if !u.deadline.passed() {
		// A call whose deadline passed while it waited for a place is
		// answered TIMEOUT below without ever going upstream.
		err = next.ServeHTTP(u, up)
		if err == nil && u.held && u.reopen != nil && u.reopen.lost {
			err = h.reopenAndResend(x, u, up, next)
		}
	}
	u.stopKeepalive()
	u.trailer()
	if u.seen != nil {
		u.seen.finish(u)
	}
	err, _ = h.settle(x, u, err, false, next)
	return err
}

// settleBroken settles an answer the proxy gave up with a panic: v. It is
// reverse_proxy's ErrAbortHandler when the upstream broke an answer it had
// started; any other panic goes on.
func (h *Handler) settleBroken(v any, x *exchange, u *upstreamWatch, next caddyhttp.Handler) error {
	u.stopKeepalive()
	if v == http.ErrAbortHandler {
		u.broke = !h.resumeBroken(x, u, next)
		if err, settled := h.settle(x, u, nil, u.broke, next); settled || !u.broke {
			return err
		}
	}
	panic(v)
}

// settle decides what the client is owed once the proxy is done, err being
// what it returned, or broke that the upstream broke its answer: nothing
// more, when the answer reached the client as the upstream wrote it or the
// client is gone; the upstream's held answer, or an envelope in its place;
// the envelope for a proxy error; or the end of an event stream that owes
// responses. settled reports whether it answered.
func (h *Handler) settle(x *exchange, u *upstreamWatch, err error, broke bool, next caddyhttp.Handler) (_ error, settled bool) {
	if u.sse != nil {
		u.sse.owed.unconfirm() // its last CR is its last byte: no LF will come
	}
	if x.dropsAnswers() {
		// The body was refused while it streamed, and the upstream's
		// request aborted for it: what the proxy says of that is nobody's
		// to hear.
		return nil, true
	}
	switch {
	case x.Request.Context().Err() != nil:
		if u.deadline.passed() {
			// The client left, and the call ran on (its places held) until
			// its deadline cut it: the server is told to stop it all the
			// same.
			x.release(time.Now()) // not held while the upstream takes it
			h.cancelAtDeadline(x, u, next)
		}
		return err, false
	case u.deadline.passed() && u.owesAnswer():
		return h.timeUp(x, u, next), true
	case u.read != nil && u.read.holding && (broke || err != nil) && u.read.failed == nil:
		// The upstream broke its answer before its end, which the client
		// has not seen any of.
		clearEntityHeaders(u.Header())
		env := h.failures.Broken("the connection to the MCP server broke")
		return h.answer(u.ResponseWriterWrapper.ResponseWriter, x, &env, http.StatusOK), true
	case u.read != nil && u.read.holding:
		err := h.releaseRead(u)
		if broke {
			h.cancelUnread(x, u, next) // its reading stopped before its end
		}
		return err, true
	case u.sse != nil && u.sse.stop != nil:
		return h.answerStopped(x, u, next), true
	case u.held:
		return h.replaceHeld(u), true
	case broke || err == nil:
		if u.sse != nil && u.sse.repairable() {
			what := "the MCP server ended its answer without responding"
			if broke {
				what = "the connection to the MCP server broke"
			}
			return h.repairStream(u, what), true
		}
	case u.status == 0:
		ref := u.hooks.unreached(x.view(), err)
		if comesBack(x) && (ref == nil || ref.Status != http.StatusNotFound) {
			// Out of reach for now; a session gone is gone (404).
			return h.comeBack(u.ResponseWriterWrapper.ResponseWriter, x, err), true
		}
		if ref != nil {
			return h.refuseWith(u.ResponseWriterWrapper.ResponseWriter, x, ref), true
		}
		if env, status, ok := h.failures.Unreached(err); ok {
			x.cause = err
			return h.answer(u.ResponseWriterWrapper.ResponseWriter, x, &env, status), true
		}
	}
	return err, false
}

// traceUpstream gives up, the request going upstream, the body with the
// trace's context spliced in (each message's span context in its
// params._meta, for a server that continues the trace), when the request
// is traced and its body was read.
func (x *exchange) traceUpstream(up *http.Request) {
	if x.trace == nil || x.Body == nil {
		return
	}
	buf := reqbody.Get(len(x.Body) + feature.SpliceRoom*len(x.Messages))
	body, changed := x.trace.AppendBody((*buf)[:0], x.Body)
	if !changed {
		reqbody.Put(buf)
		return
	}
	if cap(body) == cap(*buf) {
		x.trace.buf = buf // recycled with the body's own
	}
	x.rewritten = body
	x.reader.Reset(body)
	up.ContentLength = int64(len(body))
}
