package feature

import (
	"net/http"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// HeaderHook is implemented by a hook that rewrites the header of the
// answer (sessions seal the upstream's session id). Header is given each
// header the upstream writes, before the client gets it: status says
// which, an informational one (1xx) or the final one. Trailer is given
// the header once the proxy has copied the upstream's trailers into it,
// before they are sent; it is not called when no header was written.
type HeaderHook interface {
	Header(x *Exchange, status int, h http.Header)
	Trailer(x *Exchange, h http.Header)
}

// Deadline is implemented by a check that bounds how long a call may run
// (the tool policy's timeouts). Deadline is how long x may run from when
// the gateway received it (0: no bound); the shortest of the checks'
// bounds holds. When it passes before the answer began, the core cuts the
// upstream request, answers the call with TimedOut's envelope (as the
// answer, or as the last event of a stream that owes it), gives back what
// lingers (the guard's places), and tells the upstream to stop.
type Deadline interface {
	Deadline(x *Exchange) time.Duration
	TimedOut(x *Exchange, after time.Duration) envelope.Envelope
}

// Unreached is implemented by a hook that answers in the upstream's place
// when the proxy could not reach it and nothing of an answer was written
// (sessions: the replica a session is pinned to is gone). err is what the
// proxy returned. It returns the answer, or nil to let the core answer
// for the failure.
type Unreached interface {
	Unreached(x *Exchange, err error) *Refusal
}

// Reopener is implemented by a hook that can give a request a new upstream
// session when the upstream answered 404 to the one it names: the
// transport's "session not found", as a stateful server answers once it
// restarted and lost its sessions (sessions: a pinned session whose token
// carries the client's initialize).
//
// Reinitialize returns the params of the client's initialize request, as
// it sent them, or false when the hook cannot reopen the session. The core
// then sends initialize with them, and notifications/initialized, under no
// session id, to the upstream the session is pinned to, and calls
// Reopened with r, the initialize request as it was sent (its context holds
// what the selection policy wrote), and id, the session id the upstream
// answered with. Reopened makes x's request name the new session (its
// header, its pin), and the request is sent again, once, under it: a 404
// means the upstream never ran it. The client keeps the session id it
// holds.
type Reopener interface {
	Reinitialize(x *Exchange) (params []byte, ok bool)
	Reopened(x *Exchange, r *http.Request, id string)
}

// NotReopened is implemented by a Reopener that answers in the place of
// the upstream's 404 when the session could not be reopened (federation:
// one server of several lost its session, and the client's session with
// the others must not end for it). NotReopened returns the answer, or nil
// to let the 404 reach the client as the upstream wrote it.
type NotReopened interface {
	NotReopened(x *Exchange, err error) *Refusal
}
