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
