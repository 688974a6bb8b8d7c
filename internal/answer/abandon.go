package answer

import (
	"context"
	"fmt"
	"sync"
	"time"

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

// ErrClientLeft and errAbandoned are why an upstream request was cut: its
// client left (the cancellation of the stateless era), or the grace after
// it did passed. Both are a context.Canceled, as a client leaving is to
// reverse_proxy: the request is not the upstream's failure, and it is
// logged as 499.
var (
	ErrClientLeft = fmt.Errorf("the client left: %w", context.Canceled)
	errAbandoned  = fmt.Errorf("the upstream did not answer within cancel_grace after the client left: %w", context.Canceled)
)

// Where a panic is recovered (package panics): on the goroutine that acts
// for a client that left, and on the timer that ends its grace.
const (
	siteClientLeft  = "client_left"
	siteCancelGrace = "cancel_grace"
)

// Abandonment watches the client of a request that holds places, and acts
// for it when it leaves. Its fields are written before the request goes
// upstream, or under the goroutine handling the client's leaving
// (clientLeft), which Done waits for.
type Abandonment struct {
	u *Watch
	// client is the client's request's context; cut ends the upstream
	// request.
	client context.Context
	cut    context.CancelCauseFunc
	// grace is how long the places are held after the client left
	// (feature.Lingering); closingCancels: the request's era takes
	// closing its stream for the cancellation.
	grace          time.Duration
	closingCancels bool
	// cancel is told that the gateway cancels the request for its client:
	// send, that the upstream must be sent notifications/cancelled (the
	// cut is the cancellation otherwise). It runs on the goroutine acting
	// for the client.
	cancel func(send bool)
	// stop stops watching the client; handled is done once its leaving
	// has been dealt with, or will never be.
	stop    func() bool
	handled sync.WaitGroup
	// Written by clientLeft: the grace's timer, and hold: the places are
	// kept for the grace after the request ends (the upstream request was
	// cut as the cancellation).
	timer *time.Timer
	hold  bool
}

// Detach cuts the upstream request loose from its client's (client): it
// returns the context of an upstream request its client leaving does not
// cancel, and the abandonment that acts for the client when it leaves,
// holding the places for grace at most. closingCancels says the request's
// era takes closing for the cancellation; cancel is told when the gateway
// cancels the request. Watch must then be called, once the request's
// deadline (if any) is set, and Done once the upstream request is over.
func (u *Watch) Detach(client context.Context, grace time.Duration, closingCancels bool, cancel func(send bool)) (*Abandonment, context.Context) {
	ctx, cut := context.WithCancelCause(context.WithoutCancel(client))
	return &Abandonment{u: u, client: client, cut: cut, grace: grace, closingCancels: closingCancels, cancel: cancel}, ctx
}

// Watch starts watching the client.
func (a *Abandonment) Watch() {
	a.handled.Add(1)
	a.stop = context.AfterFunc(a.client, a.clientLeft)
}

// clientLeft acts for a client that left while its request was upstream,
// on a goroutine of its own. A panic ends the upstream request, however
// far it got: its places come back once the request is over.
func (a *Abandonment) clientLeft() {
	defer a.handled.Done()
	defer panics.Recover(a.u.core.Logger(), siteClientLeft, func() { a.cut(ErrClientLeft) })
	u := a.u
	switch {
	case u.Deadline.Passed():
		// Cut at its deadline already, and the upstream told.
	case u.Answered.Load():
		// Answered: nothing runs upstream for it any more, and nothing is
		// left to hold its places for.
		a.cut(ErrClientLeft)
	case !u.Delivery.Settled(a.grace):
		a.cut(ErrClientLeft) // it runs nowhere
	case a.closingCancels:
		a.hold = true
		a.cut(ErrClientLeft)
		a.cancel(false)
	default:
		a.timer = time.AfterFunc(a.grace, a.graceOver)
		if !u.Resumable.Load() && u.Cancelled.CompareAndSwap(false, true) {
			a.cancel(true)
		}
	}
}

// graceOver cuts the upstream request cancel_grace after its client left.
func (a *Abandonment) graceOver() {
	defer panics.Recover(a.u.core.Logger(), siteCancelGrace)
	a.cut(errAbandoned)
}

// Done ends the watch once the upstream request is over, waiting for the
// client's leaving to be dealt with if it began. It returns how long the
// places must still be held (0: not at all), which the core hands to a
// timer that frees them.
func (a *Abandonment) Done() (hold time.Duration) {
	if a.stop() {
		a.handled.Done() // clientLeft never runs
		a.cut(nil)
		return 0
	}
	a.handled.Wait()
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.hold {
		return a.grace
	}
	return 0
}
