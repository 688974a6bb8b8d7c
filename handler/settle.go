package handler

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// Settling an answer: what the client is owed once the proxy is done with
// the upstream (the watch, package answer, read it as it passed).

// settleBroken settles an answer the proxy gave up with a panic: v. It is
// reverse_proxy's ErrAbortHandler when the upstream broke an answer it had
// started; any other panic goes on.
func (h *Handler) settleBroken(v any, x *exchange, u *answer.Watch, next caddyhttp.Handler) error {
	u.StopKeepalive()
	if v == http.ErrAbortHandler {
		u.Broke = !u.Resume(resumeSender(x, u, next), countResume)
		if err, settled := h.settle(x, u, nil, u.Broke, next); settled || !u.Broke {
			return err
		}
	}
	panic(v)
}

// resumeSender sends the GET that resumes the stream of x's answer, which
// the upstream broke (answer.Watch.Resume), through the rest of the route
// as the client's request went: under the upstream request's context (its
// deadline), with its variables and placeholders.
func resumeSender(x *exchange, u *answer.Watch, next caddyhttp.Handler) func(string, http.ResponseWriter) error {
	return func(lastID string, w http.ResponseWriter) error {
		r, repl := own.Prepare(own.Resume(u.Upstream.Context(), x.Request, lastID), own.Vars(x.Request), w)
		repl.Map(x.placeholder)
		return next.ServeHTTP(w, r)
	}
}

// settle decides what the client is owed once the proxy is done, err being
// what it returned, or broke that the upstream broke its answer: nothing
// more, when the answer reached the client as the upstream wrote it or the
// client is gone; the upstream's held answer, or an envelope in its place;
// the envelope for a proxy error; or the end of an event stream that owes
// responses. settled reports whether it answered.
func (h *Handler) settle(x *exchange, u *answer.Watch, err error, broke bool, next caddyhttp.Handler) (_ error, settled bool) {
	t := u.Stream()
	if t != nil {
		t.Ended() // its last CR is its last byte: no LF will come
	}
	if x.dropsAnswers() {
		// The body was refused while it streamed, and the upstream's
		// request aborted for it: what the proxy says of that is nobody's
		// to hear.
		return nil, true
	}
	switch {
	case x.Request.Context().Err() != nil:
		if u.Deadline.Passed() {
			// The client left, and the call ran on (its places held) until
			// its deadline cut it: the server is told to stop it all the
			// same.
			x.release(time.Now()) // not held while the upstream takes it
			h.cancelAtDeadline(x, u, next)
		}
		return err, false
	case u.Deadline.Passed() && u.OwesAnswer():
		return h.timeUp(x, u, next), true
	case u.State() == answer.Holding && (broke || err != nil) && u.Failed() == nil:
		// The upstream broke its answer before its end, which the client
		// has not seen any of.
		u.Replace()
		answer.ClearEntityHeaders(u.Header())
		env := h.failures.Broken("the connection to the MCP server broke")
		return h.answer(u.ResponseWriterWrapper.ResponseWriter, x, &env, http.StatusOK), true
	case u.State() == answer.Holding:
		err := u.ReleaseRead()
		if broke {
			h.cancelUnread(x, u, next) // its reading stopped before its end
		}
		return err, true
	case t != nil && t.Stopped() != nil:
		return h.answerStopped(x, u, next), true
	case u.State() == answer.Held:
		return h.replaceHeld(x, u), true
	case broke || err == nil:
		if t != nil && t.Repairable() {
			what := "the MCP server ended its answer without responding"
			if broke {
				what = "the connection to the MCP server broke"
			}
			return h.repairStream(x, u, what), true
		}
	case u.State() == answer.Waiting:
		return h.unreached(x, u, err)
	}
	return err, false
}

// unreached answers for an upstream the proxy could not reach, err being
// what it returned: with a hook's answer, the envelope of a server that
// comes back, or the envelope for err; settled reports whether it
// answered.
func (h *Handler) unreached(x *exchange, u *answer.Watch, err error) (_ error, settled bool) {
	w := u.ResponseWriterWrapper.ResponseWriter
	var refused *feature.Refused
	if errors.As(err, &refused) && !(refused.Status >= 500 && answer.MayComeBack(x.Request, x.Era)) {
		// A handler of the route would not send the request on. A
		// session's GET stream whose refusal may pass (the issuer of the
		// server's credential out of reach) is asked to come back below,
		// as for a server out of reach: the Go SDK's client ends the
		// whole session on an error there.
		return h.refuseWith(w, x, &refused.Refusal), true
	}
	ref := u.Hooks().Unreached(x.view(), err)
	if answer.MayComeBack(x.Request, x.Era) && (ref == nil || ref.Status != http.StatusNotFound) {
		// Out of reach for now; a session gone is gone (404).
		if c := h.logger.Check(zap.DebugLevel, "the upstream of a session's GET stream is out of reach: the client is asked to come back"); c != nil {
			c.Write(zap.Duration("retry", answer.ComeBackAfter), zap.Error(err))
		}
		return answer.ComeBack(w), true
	}
	if ref != nil {
		return h.refuseWith(w, x, ref), true
	}
	if env, status, ok := h.failures.Unreached(err); ok {
		x.cause = err
		return h.answer(w, x, &env, status), true
	}
	return err, false
}

// repairStream ends a broken, non-resumable event stream with one message
// event per request still owed a response, each carrying the envelope.
func (h *Handler) repairStream(x *exchange, u *answer.Watch, what string) error {
	env := h.failures.Broken(what)
	h.answered(x, &env)
	out := u.Stream().AppendRepair(nil, &env)
	w := u.ResponseWriterWrapper.ResponseWriter
	if _, err := w.Write(out); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// answerStopped ends a stream whose reading stopped (checkBound): the
// event it stopped in is discarded, the request it may have answered is
// answered with the hooks' words for what they could not read, any other
// still owed with the envelope of a broken answer; then the upstream is
// told to stop.
func (h *Handler) answerStopped(x *exchange, u *answer.Watch, next caddyhttp.Handler) error {
	t := u.Stream()
	out := t.AppendUnfinished(nil)
	if id := u.Hooks().ID(); id != nil {
		// Answered already, perhaps, by a response a client refused.
		t.Settle(id)
		out = sse.AppendMessage(out, nil, false, x.Unreadable(t.Stopped(), id))
	}
	if t.Owed() > 0 {
		env := h.failures.Broken("the gateway stopped reading the MCP server's answer")
		h.answered(x, &env)
		out = t.AppendOwed(out, &env)
	}
	w := u.ResponseWriterWrapper.ResponseWriter
	_, err := w.Write(out)
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	h.cancelUnread(x, u, next)
	return err
}

// cancelUnread tells the upstream to stop a request whose answer the
// gateway stopped reading before its end: its places are given back
// first, as at a deadline, and the cancellation is sent once.
func (h *Handler) cancelUnread(x *exchange, u *answer.Watch, next caddyhttp.Handler) {
	x.release(time.Now())
	if u.Cancelled.CompareAndSwap(false, true) {
		cancellations.WithLabelValues(reasonLabelUnread).Inc()
		h.sendCancelled(x, x.Request.Header, own.Vars(x.Request), next, reasonUnread)
	}
}

// The exchange is the core the watch of its answer asks (answer.Core).
var _ answer.Core = (*exchange)(nil)

// Unreadable is the JSON-RPC error sent, for id, in place of what the
// hooks could not read, and recorded as the exchange's answer.
func (x *exchange) Unreadable(err error, id json.RawMessage) []byte {
	env := x.watch.Hooks().Unreadable(x.view(), err)
	x.h.answered(x, &env)
	if m := x.Single(); m != nil && isCall(m) && string(m.ID) == string(id) {
		// A call's answer is a result the model reads (the wire contract).
		return env.AppendToolResult(nil, id)
	}
	return env.AppendRPCError(nil, id, x.Era.RPCCode(&env))
}

// replaceHeld decides what a held error answer was. The upstream's own
// JSON-RPC messages pass through untouched; anything else (an HTML error
// page, a plain-text stack trace, nothing) becomes the envelope for its
// status.
func (h *Handler) replaceHeld(x *exchange, u *answer.Watch) error {
	if isJSONRPC(u.HeldBody()) {
		return u.Release()
	}
	env, status := h.failures.ErrorPage(u.Status(), u.Header(), u.HeldBody())
	u.Replace()
	answer.ClearEntityHeaders(u.Header())
	return h.answer(u.ResponseWriterWrapper.ResponseWriter, x, &env, status)
}

// UpstreamStatus tells the trace the status the upstream answered with.
func (x *exchange) UpstreamStatus(status int) {
	if x.trace != nil {
		x.trace.Upstream(status)
	}
}

// Logger is the handler's.
func (x *exchange) Logger() *zap.Logger { return x.h.logger }
