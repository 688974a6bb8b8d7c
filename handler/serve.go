package handler

import (
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// ServeHTTP takes a request through the handler's steps: the origin check,
// the identity phase (authorization, before any body is read), then, for
// a JSON-RPC POST, inspection (inspect.go), the phases of
// admission and the checks (admit.go, features.go), and forwarding
// (forward.go). GET and DELETE are only origin-checked, their session
// opened, and forwarded. Whatever happens, finish gives back what the
// admitters took (the guard's places) and counts the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	x := &exchange{Exchange: feature.Exchange{Request: r, Start: time.Now(), Era: eraOf(r), Replacer: repl}, h: h}
	repl.Map(x.placeholder)
	defer h.finish(x)
	for _, f := range h.fronts {
		if f.Front(w, r) {
			// Public, and read by clients of any origin before they
			// have a token (authorization's metadata).
			return nil
		}
	}
	if !h.origins.Allows(r) {
		env := originRefused(r.Header.Get("Origin"))
		closeAfterAnswer(w, r)
		return h.answer(w, x, &env, http.StatusForbidden)
	}
	if !mcpMethod(r.Method) && h.governsCalls() {
		// A request the gateway does not read (a PUT, a "post" that a
		// lenient server takes for a POST) could carry a call it would
		// not admit.
		env := methodRefused(r.Method)
		w.Header().Set("Allow", "GET, POST, DELETE")
		closeAfterAnswer(w, r)
		return h.answer(w, x, &env, http.StatusMethodNotAllowed)
	}
	if len(h.identity) > 0 && isPreflight(r) {
		// A browser's CORS preflight carries no credentials: it goes on
		// as what it is, and nothing more (no body, no session).
		r.Body, r.ContentLength = http.NoBody, 0
		for _, k := range []string{"Authorization", "Mcp-Session-Id", "Content-Length", "Transfer-Encoding"} {
			r.Header.Del(k)
		}
		return h.forward(w, x, next)
	}
	// Credentials first, before the body is read: a caller that is
	// nobody costs no more than its headers.
	if ref := x.admit(h.identity); ref != nil {
		if r.Method == http.MethodPost {
			closeAfterAnswer(w, r) // its body is left unread
		}
		return h.refuseWith(w, x, ref)
	}
	if r.Method == http.MethodPost {
		if err := h.inspect(w, x); err != nil {
			if h.passesUninspected(err, r) {
				// Nothing here limits the request, and it is not JSON and
				// does not claim to be: the upstream refuses it in its own
				// words (415 from the SDK servers).
				x.Messages = nil
				return h.openAndForward(w, x, next)
			}
			return h.refuseBody(w, x, err)
		}
		x.startTrace(h.tracer)
		if x.stream != nil {
			return h.serveStreamed(w, x, next)
		}
		return h.admitAndForward(w, x, next)
	}
	return h.openAndForward(w, x, next)
}

// openAndForward opens the session of a request nothing else admits (a
// GET, a DELETE, a body passed uninspected) and forwards it.
func (h *Handler) openAndForward(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) error {
	if ref := x.admit(h.openers); ref != nil {
		return h.refuseWith(w, x, ref)
	}
	return h.forward(w, x, next)
}

// admitAndForward takes an inspected POST through the phases of admission
// (docs/architecture.md) and on to the upstream.
func (h *Handler) admitAndForward(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) error {
	if ref := h.admitCall(x); ref != nil {
		return h.refuseWith(w, x, ref)
	}
	// The places are held until the response is completely written:
	// finish releases them.
	return h.forward(w, x, next)
}

// admitCall takes x through the phases of admission and the checks, and
// returns the first refusal.
func (h *Handler) admitCall(x *exchange) *feature.Refusal {
	if x.trace != nil {
		return h.admitTraced(x)
	}
	if ref := x.admit(h.openers); ref != nil {
		return ref
	}
	if ref := x.admit(h.admitters); ref != nil {
		return ref
	}
	// After the limits: a refused call still cost its tokens.
	if ref := h.check(x); ref != nil {
		return ref
	}
	return x.admit(h.entries)
}

// admitTraced is admitCall for a traced request: the trace is told of
// each phase that has a feature to run, with the time it took (a sealed
// session opened, the limits decided, in Redis or not, the checks,
// validation among them, a place in the guard).
func (h *Handler) admitTraced(x *exchange) *feature.Refusal {
	phases := [...]struct {
		phase feature.Phase
		run   bool
		step  func() *feature.Refusal
	}{
		{feature.PhaseSession, len(h.openers) > 0, func() *feature.Refusal { return x.admit(h.openers) }},
		{feature.PhaseAdmission, len(h.admitters) > 0, func() *feature.Refusal { return x.admit(h.admitters) }},
		{feature.PhaseChecks, len(h.checks) > 0, func() *feature.Refusal { return h.check(x) }},
		{feature.PhaseEntry, len(h.entries) > 0, func() *feature.Refusal { return x.admit(h.entries) }},
	}
	for _, p := range phases {
		if !p.run {
			continue
		}
		start := time.Now()
		ref := p.step()
		x.trace.Phase(p.phase, time.Since(start))
		if ref != nil {
			return ref
		}
	}
	return nil
}

// passesUninspected reports whether a body the handler could not inspect may
// still go to the upstream: only when nothing configured governs what
// such a body may hold (no rate limit, no guard, no tools policy, no
// contract that refuses), since any of them could apply to a message the
// handler cannot read (a server that decodes gzip, or reads JSON5, would run
// a call to a denied tool), and only when the body does not claim to be
// JSON (a body that claims it and is not is malformed). A body in a
// Content-Encoding counts as not inspected, whatever its bytes: a server
// that decodes it reads other bytes. validate alone lets it pass: a call it
// cannot check passes, as one whose tool it does not know does.
func (h *Handler) passesUninspected(err error, r *http.Request) bool {
	if h.governsCalls() {
		return false
	}
	var syntax *jsonrpc.SyntaxError
	return errors.Is(err, errEncoded) || (errors.As(err, &syntax) && !claimsJSON(r))
}

// governsCalls reports whether anything configured decides which calls
// run: a rate limit, the guard, a check that governs (a tools policy, a
// contract that refuses). A request the gateway cannot read is then
// refused, rather than passed.
func (h *Handler) governsCalls() bool {
	return len(h.admitters) > 0 || len(h.entries) > 0 || h.governs
}

// mcpMethod reports whether an HTTP method is one MCP's transport uses, or
// one that carries no call (HEAD, OPTIONS: a CORS preflight).
func mcpMethod(method string) bool {
	switch method {
	case http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

// finish gives the admitters back what they took (the guard's places),
// counts the exchange and recycles its body, once it is over, whatever
// happened.
func (h *Handler) finish(x *exchange) {
	now := time.Now()
	x.undo(now, true)
	if x.trace != nil {
		x.trace.Finish(now)
	}
	h.observe(x, now)
	h.tellObservers(x, now)
	x.recycle()
}

// isPreflight reports whether r is a browser's CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" && r.Header.Get("Origin") != ""
}
