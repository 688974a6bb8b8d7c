package handler

import (
	"maps"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
)

// askFeatures asks the plugged features what the core must do for them:
// whether one governs which calls run (a body the core cannot read is then
// refused), whether one reads a whole body (none then streams), and which
// bound how long a call runs.
func (h *Handler) askFeatures() {
	for _, c := range h.checks {
		g, ok := c.(feature.Governing)
		h.governs = h.governs || (ok && g.Governs())
		h.wholeBody = h.wholeBody || readsWholeBody(c)
		if d, ok := c.(feature.Deadline); ok {
			h.deadlines = append(h.deadlines, d)
		}
	}
	for _, a := range h.entries {
		h.wholeBody = h.wholeBody || readsWholeBody(a)
	}
}

func readsWholeBody(f any) bool {
	w, ok := f.(feature.WholeBody)
	return ok && w.ReadsWholeBody()
}

// check runs the features' checks on x, in order, and returns the first
// refusal.
func (h *Handler) check(x *exchange) *feature.Refusal {
	if len(h.checks) == 0 {
		return nil
	}
	fx := x.view()
	for _, c := range h.checks {
		if ref := c.Check(fx); ref != nil {
			return ref
		}
	}
	return nil
}

// refuseWith answers x with an admitter's or a check's refusal.
func (h *Handler) refuseWith(w http.ResponseWriter, x *exchange, ref *feature.Refusal) error {
	if ref.Gone {
		// The client went away while it waited: nobody is left to answer.
		x.canceled = true
		return caddyhttp.Error(statusClientClosed, ref.Cause)
	}
	x.cause = ref.Cause
	maps.Copy(w.Header(), ref.Header)
	if p := ref.Plain; p != nil {
		x.errorCode = p.Outcome
		maps.Copy(w.Header(), p.Header)
		// A JSON-RPC error like every other refusal, and written the same
		// way: its type is the core's to set, not each feature's.
		return writeJSON(w, p.Status, nil, p.Body)
	}
	if ref.Body == nil {
		return h.answer(w, x, &ref.Envelope, ref.Status)
	}
	h.answered(x, &ref.Envelope)
	return writeJSON(w, http.StatusOK, &ref.Envelope, ref.Body)
}

// annotate are the annotators' sections about tool, each that has one.
func (h *Handler) annotate(x *feature.Exchange, tool string) []string {
	var sections []string
	for _, a := range h.annotators {
		if s := a.Annotate(x, tool); s != "" {
			sections = append(sections, s)
		}
	}
	return sections
}
