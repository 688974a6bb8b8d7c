package handler

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// Forwarding: the request goes to the next handler (reverse_proxy), and its
// answer comes back through an answer.Watch, which passes everything
// through as it is written, except what the gateway must answer for the
// upstream: an error status whose body is not JSON-RPC, a proxy error
// returned before anything was written, and an event stream that ended
// before the response it owed.

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
	var trace feature.Hook
	if x.trace != nil {
		trace = x.trace.Answer()
	}
	if u.Start(w, x.view(), x, h.responders, x.undos, trace) {
		defer func() { u.Hooks().End(&x.Exchange, u.Ending(err, x.errorCode != "")) }()
		h.mayReopen(x, u)
	}
	u.KeepaliveEvery = time.Duration(h.SSEKeepalive)
	up, abandon := h.upstreamRequest(x, u, next)
	if d, cut, cancel := h.startDeadline(x, up); d != nil {
		u.Deadline, up = d, cut
		defer cancel(nil)
		defer d.Timer.Stop()
	}
	u.Upstream = up
	if abandon != nil {
		abandon.Watch()
		defer func() {
			if hold := abandon.Done(); hold > 0 {
				x.holdFor(hold, h.logger)
			}
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			err = h.settleBroken(v, x, u, next)
		}
	}()
	if !u.Deadline.Passed() {
		// A call whose deadline passed while it waited for a place is
		// answered TIMEOUT below without ever going upstream.
		err = next.ServeHTTP(u, up)
		if err == nil && u.State() == answer.Held && u.Reopen != nil && u.Reopen.Lost {
			err = h.reopenAndResend(x, u, up, next)
		}
	}
	u.Finish()
	err, _ = h.settle(x, u, err, false, next)
	return err
}

// upstreamRequest is the request of x as it goes upstream: cut loose from
// its client's when it holds places (abandon then acts for a client that
// leaves), followed by the transport when it may have to be cancelled, with
// the trace's context spliced in and the body as the rewriters leave it.
func (h *Handler) upstreamRequest(x *exchange, u *answer.Watch, next caddyhttp.Handler) (up *http.Request, abandon *answer.Abandonment) {
	up = x.Request
	ctx := up.Context()
	if grace := x.linger(); grace > 0 && !(h.UpstreamCancelsOnClose && x.Era.ClosingCancels()) {
		// The request holds places in the guard, and its upstream may go
		// on running it when the client leaves (before MCP 2026-07-28
		// closing the connection does not cancel a call, and from it on
		// servers do not all stop). The upstream request is cut loose from
		// the client's, and its answer read to its end, into nothing once
		// the client is gone, for as long as answer.Abandonment says.
		abandon, ctx = h.detach(x, u, next, grace)
		u.Drain = true
	}
	if abandon != nil || len(h.deadlines) > 0 {
		// What the transport did with the request: a call cut at its
		// deadline is cancelled upstream only once it got there.
		ctx = u.Delivery.Trace(ctx)
	}
	if ctx != up.Context() {
		up = up.WithContext(ctx)
	}
	x.traceUpstream(up)
	x.rewrite(h.rewriters, up)
	return up, abandon
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
