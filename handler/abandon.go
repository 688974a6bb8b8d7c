package handler

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// Abandoned requests. A request holding places in the guard is not cut
// when its client leaves: the upstream may still be running its calls, and
// the places stand for that work. But a client that leaves is a client
// that cancels, and a place must always come back. So when the client of
// such a request leaves before its answer ended, and the request reached
// the upstream:
//
//   - Before MCP 2026-07-28, closing is no cancellation: the gateway sends
//     notifications/cancelled for each request of the body, on its session,
//     through the rest of the route (so that it reaches the replica the
//     session is pinned to). It does not when the answer is a stream the
//     client may resume (an event carried an id): the client may come back
//     for it. The answer is read on, into nothing, and the places come
//     back when it ends or, at the latest, cancel_grace after the client
//     left, when the upstream request is cut.
//   - From 2026-07-28 on, closing the stream is the cancellation: the
//     upstream request is cut at once, and the places are held for
//     cancel_grace, the time a server that runs on anyway may take.
//
// A request that never reached the upstream (cut at its deadline while it
// waited for a connection, say) runs nowhere: it is cut, and nothing is
// cancelled.

// errClientLeft and errAbandoned are why an upstream request was cut: its
// client left (the cancellation of the stateless era), or the grace after
// it did passed. Both are a context.Canceled, as a client leaving is to
// reverse_proxy: the request is not the upstream's failure, and it is
// logged as 499.
var (
	errClientLeft = fmt.Errorf("the client left: %w", context.Canceled)
	errAbandoned  = fmt.Errorf("the upstream did not answer within cancel_grace after the client left: %w", context.Canceled)
)

// Where a panic is recovered (package panics): on the goroutine that acts
// for a client that left, and on the timer that ends its grace.
const (
	siteClientLeft  = "client_left"
	siteCancelGrace = "cancel_grace"
)

// abandonment watches the client of a request that holds places, and acts
// for it when it leaves. Its fields are written before the request goes
// upstream, or under the goroutine handling the client's leaving
// (clientLeft), which done waits for.
type abandonment struct {
	h    *Handler
	x    *exchange
	u    *answer.Watch
	next caddyhttp.Handler
	// cut ends the upstream request.
	cut context.CancelCauseFunc
	// cancelGrace is how long the places are held after the client left
	// (feature.Lingering).
	cancelGrace time.Duration
	// vars and header are the request's variables and header as it went
	// upstream: the route writes to the first while it serves the
	// request, and a session reopened to the second, so the
	// cancellation, sent meanwhile, has copies of its own (of the header,
	// when the session may be reopened: nothing else writes it then).
	vars   map[string]any
	header http.Header
	// stop stops watching the client; handled is done once its leaving
	// has been dealt with, or will never be.
	stop    func() bool
	handled sync.WaitGroup
	// Written by clientLeft: the grace's timer, and hold: the places are
	// kept for the grace after the request ends (the upstream request was
	// cut as the cancellation).
	grace *time.Timer
	hold  bool
}

// detach returns the context of the upstream request of x, which holds
// places: one its client leaving does not cancel. watch must then be
// called, once the request's deadline (if any) is set, and done once the
// upstream request is over.
func (h *Handler) detach(x *exchange, u *answer.Watch, next caddyhttp.Handler, grace time.Duration) (*abandonment, context.Context) {
	ctx, cut := context.WithCancelCause(context.WithoutCancel(x.Request.Context()))
	header := x.Request.Header
	if u.Reopen != nil {
		// A reopen rewrites the request's header on its goroutine while
		// the client's leaving is dealt with on another.
		header = header.Clone()
	}
	return &abandonment{h: h, x: x, u: u, next: next, cut: cut, vars: own.Vars(x.Request), header: header, cancelGrace: grace}, ctx
}

// watch starts watching the client.
func (a *abandonment) watch() {
	a.handled.Add(1)
	a.stop = context.AfterFunc(a.x.Request.Context(), a.clientLeft)
}

// clientLeft acts for a client that left while its request was upstream,
// on a goroutine of its own. A panic ends the upstream request, however
// far it got: its places come back once the request is over.
func (a *abandonment) clientLeft() {
	defer a.handled.Done()
	defer panics.Recover(a.h.logger, siteClientLeft, func() { a.cut(errClientLeft) })
	u := a.u
	switch {
	case u.Deadline.Passed():
		// Cut at its deadline already, and the upstream told.
	case u.Answered.Load():
		// Answered: nothing runs upstream for it any more, and nothing is
		// left to hold its places for.
		a.cut(errClientLeft)
	case !u.Delivery.Settled(a.cancelGrace):
		a.cut(errClientLeft) // it runs nowhere
	case a.x.Era.ClosingCancels():
		a.hold = true
		a.cut(errClientLeft)
		cancellations.WithLabelValues(reasonLabelClientLeft).Inc()
	default:
		a.grace = time.AfterFunc(a.cancelGrace, a.graceOver)
		if !u.Resumable.Load() && u.Cancelled.CompareAndSwap(false, true) {
			cancellations.WithLabelValues(reasonLabelClientLeft).Inc()
			a.h.sendCancelled(a.x, a.header, a.vars, a.next, reasonClientLeft)
		}
	}
}

// graceOver cuts the upstream request cancel_grace after its client left.
func (a *abandonment) graceOver() {
	defer panics.Recover(a.h.logger, siteCancelGrace)
	a.cut(errAbandoned)
}

// done ends the watch once the upstream request is over, waiting for the
// client's leaving to be dealt with if it began. Places the grace must
// still hold are handed to a timer that frees them.
func (a *abandonment) done() {
	if a.stop() {
		a.handled.Done() // clientLeft never runs
		a.cut(nil)
		return
	}
	a.handled.Wait()
	if a.grace != nil {
		a.grace.Stop()
	}
	if a.hold {
		a.x.holdFor(a.cancelGrace, a.h.logger)
	}
}
