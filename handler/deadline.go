package handler

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// Deadlines: a check may bound how long a call runs (feature.Deadline, the
// tool policy's timeouts). The core cuts the upstream request when the
// bound passes before the answer began, answers the call with the check's
// envelope, gives back the places, and tells the upstream to stop.

// siteDeadline is where a panic of a deadline's timer is recovered
// (package panics).
const siteDeadline = "deadline"

// startDeadline gives the upstream request of a call with a deadline a
// context that ends at it: the shortest any check gives it. nil when none
// does.
func (h *Handler) startDeadline(x *exchange, up *http.Request) (*answer.Deadline, *http.Request, context.CancelCauseFunc) {
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
	d := &answer.Deadline{After: after, By: by, Ctx: ctx}
	left := after - time.Since(x.Start)
	if left <= 0 {
		cancel(answer.ErrDeadline) // passed while the call waited for a place
	}
	d.Timer = time.AfterFunc(max(0, left), func() {
		defer panics.Recover(h.logger, siteDeadline)
		cancel(answer.ErrDeadline)
	})
	return d, up.WithContext(ctx), cancel
}

// timeUp answers a call cut at its deadline with TIMEOUT: as the answer
// when nothing was sent yet, or as the final event of its stream. The
// guard place is freed, and the upstream told to stop.
func (h *Handler) timeUp(x *exchange, u *answer.Watch, next caddyhttp.Handler) error {
	env := u.Deadline.By.TimedOut(x.view(), u.Deadline.After)
	w := u.ResponseWriterWrapper.ResponseWriter
	var err error
	switch {
	case u.NothingSent():
		u.Replace()
		answer.ClearEntityHeaders(w.Header())
		if err = h.answer(w, x, &env, http.StatusOK); err == nil {
			// Sent now: the cancellation below may take the upstream a
			// while to accept, and the client must not wait for it.
			err = http.NewResponseController(w).Flush()
		}
	case u.Stream() != nil && u.Stream().Owed() > 0:
		h.answered(x, &env)
		if _, err = w.Write(u.Stream().AppendRepair(nil, &env)); err == nil {
			err = http.NewResponseController(w).Flush()
		}
	}
	x.release(time.Now()) // the places are not held while the upstream is told to stop
	h.cancelAtDeadline(x, u, next)
	return err
}

// cancelAtDeadline tells the upstream to stop a call cut at its deadline,
// when the call reached it and it was not told already.
func (h *Handler) cancelAtDeadline(x *exchange, u *answer.Watch, next caddyhttp.Handler) {
	if u.Delivery.Reached() && u.Cancelled.CompareAndSwap(false, true) {
		cancellations.WithLabelValues(reasonLabelDeadline).Inc()
		h.sendCancelled(x, x.Request.Header, own.Vars(x.Request), next, reasonDeadline)
	}
}
