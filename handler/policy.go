package handler

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// The tool policy (Handler.Tools): which tools the clients may list and
// call, which are deprecated, and how long a call may run. The rules
// themselves live in toolpolicy; here they meet the exchange: a call to a
// hidden tool is answered as if it did not exist, the answers to
// tools/list and tools/call are read (and edited) through an answerRead
// (rewrite.go), and a call past its deadline is cut, answered with TIMEOUT,
// and cancelled upstream.

// Tools is the tool policy of the tools block.
type Tools struct {
	// Allow lists the tools that may be listed and called, as globs (*
	// matches any run of characters). Default: every tool.
	Allow []string `json:"allow,omitempty"`
	// Deny hides the tools matching these globs, even when allowed. A
	// hidden tool is removed from every tools/list answer, and a call to it
	// is answered UNKNOWN_ACTION, as for a tool that does not exist.
	Deny []string `json:"deny,omitempty"`
	// Deprecate marks tools as deprecated: their calls still run, a
	// successful result gets a DEPRECATED warning block (isError stays
	// false), and their description in tools/list starts with a notice.
	Deprecate []toolpolicy.Deprecation `json:"deprecate,omitempty"`
	// Timeouts bound how long the calls of matching tools may take, from
	// when the gateway received them; the first that matches a tool is
	// its own. Default: none.
	Timeouts []ToolTimeout `json:"timeouts,omitempty"`
}

// ToolTimeout is a deadline for the calls of the tools matching a glob.
type ToolTimeout struct {
	Tools string         `json:"tools"`
	After caddy.Duration `json:"after"`
}

// Validate checks the policy.
func (t *Tools) Validate() error {
	_, err := t.rules()
	return err
}

func (t *Tools) rules() (*toolpolicy.Rules, error) {
	deadlines := make([]toolpolicy.Deadline, 0, len(t.Timeouts))
	for _, d := range t.Timeouts {
		deadlines = append(deadlines, toolpolicy.Deadline{Tools: d.Tools, After: time.Duration(d.After)})
	}
	return toolpolicy.New(t.Allow, t.Deny, t.Deprecate, deadlines)
}

// Deadlines.

// errDeadline is why a call past its deadline was cut.
var errDeadline = errors.New("the tool's deadline passed")

// deadline follows one call's deadline: the upstream request's context is
// cancelled when it passes before the answer is on its way.
type deadline struct {
	after time.Duration
	timer *time.Timer
	ctx   context.Context
}

// startDeadline gives the upstream request of a call with a deadline a
// context that ends at it; nil when the call has none.
func (h *Handler) startDeadline(x *exchange, up *http.Request) (*deadline, *http.Request, context.CancelCauseFunc) {
	if h.policy == nil || x.Batch || len(x.Messages) != 1 || !isCall(&x.Messages[0]) {
		return nil, up, nil
	}
	after := h.policy.Deadline(string(x.Messages[0].Name))
	if after <= 0 {
		return nil, up, nil
	}
	ctx, cancel := context.WithCancelCause(up.Context())
	d := &deadline{after: after, ctx: ctx}
	left := after - time.Since(x.Start)
	if left <= 0 {
		cancel(errDeadline) // passed while the call waited for a place
	}
	d.timer = time.AfterFunc(max(0, left), func() { cancel(errDeadline) })
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
	env := toolTimedOut(string(x.Messages[0].Name), u.deadline.after)
	w := u.ResponseWriterWrapper.ResponseWriter
	var err error
	switch {
	case u.nothingSent():
		if u.read != nil {
			u.read.holding, u.read.body = false, heldBytes{}
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
		h.sendCancelled(x, requestVars(x), next, reasonDeadline)
	}
}
