package handler

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// Deadlines: a check may bound how long a call runs (feature.Deadline, the
// tool policy's timeouts). The core cuts the upstream request when the
// bound passes before the answer began, answers the call with the check's
// envelope, gives back the places, and tells the upstream to stop.

// errDeadline is why a call past its deadline was cut.
var errDeadline = errors.New("the tool's deadline passed")

// siteDeadline is where a panic of a deadline's timer is recovered
// (package panics).
const siteDeadline = "deadline"

// deadline follows one call's deadline: the upstream request's context is
// cancelled when it passes before the answer is on its way.
type deadline struct {
	after time.Duration
	// by is the check whose bound it is, which words the answer.
	by    feature.Deadline
	timer *time.Timer
	ctx   context.Context
}

// startDeadline gives the upstream request of a call with a deadline a
// context that ends at it: the shortest any check gives it. nil when none
// does.
func (h *Handler) startDeadline(x *exchange, up *http.Request) (*deadline, *http.Request, context.CancelCauseFunc) {
	if len(h.deadlines) == 0 {
		return nil, up, nil
	}
	var (
		after time.Duration
		by    feature.Deadline
	)
	fx := x.view()
	for _, d := range h.deadlines {
		if a := d.Deadline(fx); a > 0 && (after == 0 || a < after) {
			after, by = a, d
		}
	}
	if after <= 0 {
		return nil, up, nil
	}
	ctx, cancel := context.WithCancelCause(up.Context())
	d := &deadline{after: after, by: by, ctx: ctx}
	left := after - time.Since(x.Start)
	if left <= 0 {
		cancel(errDeadline) // passed while the call waited for a place
	}
	d.timer = time.AfterFunc(max(0, left), func() {
		defer panics.Recover(h.logger, siteDeadline)
		cancel(errDeadline)
	})
	return d, up.WithContext(ctx), cancel
}

// answered stops the deadline: the answer is on its way.
func (d *deadline) answered() {
	if d != nil {
		d.timer.Stop()
	}
}

// passed reports whether the deadline cut the call.
func (d *deadline) passed() bool {
	return d != nil && context.Cause(d.ctx) == errDeadline
}

// timeUp answers a call cut at its deadline with TIMEOUT: as the answer
// when nothing was sent yet, or as the final event of its stream. The
// guard place is freed, and the upstream told to stop.
func (h *Handler) timeUp(x *exchange, u *upstreamWatch, next caddyhttp.Handler) error {
	env := u.deadline.by.TimedOut(x.view(), u.deadline.after)
	w := u.ResponseWriterWrapper.ResponseWriter
	var err error
	switch {
	case u.nothingSent():
		if u.read != nil {
			u.read.holding, u.read.body, u.read.cut = false, heldBytes{}, nil
		}
		clearEntityHeaders(w.Header())
		if err = h.answer(w, x, &env, http.StatusOK); err == nil {
			// Sent now: the cancellation below may take the upstream a
			// while to accept, and the client must not wait for it.
			err = http.NewResponseController(w).Flush()
		}
	case u.sse != nil && u.sse.owed.left > 0:
		h.answered(x, &env)
		if _, err = w.Write(u.sse.appendRepair(nil, &env)); err == nil {
			err = http.NewResponseController(w).Flush()
		}
	}
	x.release(time.Now()) // the places are not held while the upstream is told to stop
	h.cancelAtDeadline(x, u, next)
	return err
}

// cancelAtDeadline tells the upstream to stop a call cut at its deadline,
// when the call reached it and it was not told already.
func (h *Handler) cancelAtDeadline(x *exchange, u *upstreamWatch, next caddyhttp.Handler) {
	if u.delivery.reached.Load() && u.cancelled.CompareAndSwap(false, true) {
		cancellations.WithLabelValues(reasonLabelDeadline).Inc()
		h.sendCancelled(x, x.Request.Header, requestVars(x), next, reasonDeadline)
	}
}
