package handler

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/own"
)

// Reopening a session the upstream lost. A stateful server that restarted
// answers 404 to every session it held: the official clients then drop
// theirs, and the Go SDK's closes the whole client session on its
// standalone GET before the model makes another call. When a hook can
// give the request a new upstream session (feature.Reopener: sessions,
// whose token carries the client's initialize), the 404 is held back, the
// gateway initializes a new session on the same upstream on the client's
// behalf (initialize with the client's params, then
// notifications/initialized), and sends the request again under it, once:
// a 404 means the upstream never ran it. The client keeps the session id
// it holds, and sees the answer to its request. When anything of this
// fails, the client gets the upstream's 404 as it was.

// reopenTimeout bounds the gateway's own initialize and
// notifications/initialized.
const reopenTimeout = cancelTimeout

// mayReopen readies the watch to reopen the session of x, when a hook can
// and the request can be sent again: a POST whose body was read whole, or
// a GET.
func (h *Handler) mayReopen(x *exchange, u *answer.Watch) {
	switch {
	case !x.Era.Resumes():
		// From MCP 2026-07-28 on there are no sessions: a 404 is a
		// method the server does not know.
		return
	case x.Request.Method == http.MethodGet:
	case x.Request.Method == http.MethodPost && x.Body != nil && x.stream == nil:
	default:
		return
	}
	for _, hook := range u.Hooks().List() {
		if r, ok := hook.(feature.Reopener); ok {
			if params, ok := r.Reinitialize(&x.Exchange); ok {
				u.Reopen = &answer.Reopening{Hook: r, Params: params, Header: u.Header().Clone()}
				return
			}
		}
	}
}

// reopenAndResend reopens the session the upstream answered 404 for, and
// sends the request again under the new one, through up; it returns what
// the proxy returned for it. When the session cannot be reopened, the
// held 404 is sent as the upstream wrote it, but to a session's GET stream,
// which is asked to come back (answer.ComeBack).
func (h *Handler) reopenAndResend(x *exchange, u *answer.Watch, up *http.Request, next caddyhttp.Handler) error {
	ro := u.Reopen
	u.Reopen = nil
	if own.AnswersRequest(u.HeldBody(), x.Messages) {
		// A JSON-RPC response to the request: the server read it, and
		// may have run it. Its session is not what it lacks.
		return u.Release()
	}
	key := x.Replica + "\x00" + x.Request.Header.Get("Mcp-Session-Id")
	if p := x.Principal; p != nil {
		// Two callers never share a reopen, whatever ids an upstream
		// hands out.
		key += "\x00" + p.Issuer + "\x00" + p.Subject
	}
	fl, err := h.reopenOnce(x, ro.Params, key, up, next)
	if err != nil {
		if ref := notReopened(x, ro, err); ref != nil {
			u.Replace()
			answer.ClearEntityHeaders(u.Header())
			return h.refuseWith(u.ResponseWriterWrapper.ResponseWriter, x, ref)
		}
		if answer.MayComeBack(x.Request, x.Era) {
			// A session's GET stream is asked to come back rather than
			// told its session is gone, which the Go SDK's client takes
			// for the end of the whole session: a server still starting
			// may take the next reopen.
			u.Replace()
			return answer.ComeBack(u.ResponseWriterWrapper.ResponseWriter)
		}
		return u.Release()
	}
	if x.Request.Context().Err() != nil || u.Cancelled.Load() {
		// The client left, and the upstream may have been told to stop:
		// nobody waits for the request sent again.
		return u.Release()
	}
	ro.Hook.Reopened(&x.Exchange, fl.Init, fl.ID)
	// The request again, as it was, under the new session: its body from
	// its start, the answer's header as before the 404.
	hdr := u.Header()
	clear(hdr)
	maps.Copy(hdr, ro.Header)
	u.Rewait()
	if up.Method == http.MethodGet {
		// The stream it would resume died with the old session.
		delete(up.Header, "Last-Event-Id")
	} else {
		// A copy: the first request's transport may not have let go of
		// the body yet (an upstream may answer before it read it), and
		// the buffer goes back to the pool once it has.
		up.Body, up.GetBody = io.NopCloser(bytes.NewReader(bytes.Clone(x.sentBody()))), nil
	}
	return next.ServeHTTP(u, up)
}

// reopenOnce reopens the session key names, or joins the reopen under way
// or just ended (own.Flights).
// notReopened is the answer in the place of the upstream's 404 to a
// session that could not be reopened, err being why; nil lets the 404
// through. A handler of the route that would not send the reopen on (the
// server's credential could not be obtained) has its refusal answered:
// the model is told why, rather than that the session is gone. Otherwise
// the reopener's hook may answer (feature.NotReopened).
func notReopened(x *exchange, ro *answer.Reopening, err error) *feature.Refusal {
	var refused *feature.Refused
	if errors.As(err, &refused) {
		return &refused.Refusal
	}
	if nr, ok := ro.Hook.(feature.NotReopened); ok {
		return nr.NotReopened(&x.Exchange, err)
	}
	return nil
}

func (h *Handler) reopenOnce(x *exchange, params []byte, key string, up *http.Request, next caddyhttp.Handler) (*own.Flight, error) {
	return h.reopens.Reopen(up.Context(), key, func() (string, *http.Request, error) {
		ctx, stop := context.WithTimeout(context.WithoutCancel(x.Request.Context()), reopenTimeout)
		defer stop()
		id, init, err := own.Initialize(ctx, x.Request, own.Vars(x.Request), next, params)
		if err != nil {
			h.logger.Warn("the upstream lost the session, and a new one could not be opened: the client is told the session is gone",
				zap.Error(err))
		}
		return id, init, err
	})
}

// sentBody is the body as it goes upstream: with the messages' trace
// context when the request is traced, as the rewriters left it.
func (x *exchange) sentBody() []byte {
	if x.rewritten != nil {
		return x.rewritten
	}
	return x.Body
}
