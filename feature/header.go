package feature

import "net/http"

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

// Unreached is implemented by a hook that answers in the upstream's place
// when the proxy could not reach it and nothing of an answer was written
// (sessions: the replica a session is pinned to is gone). err is what the
// proxy returned. It returns the answer, or nil to let the core answer
// for the failure.
type Unreached interface {
	Unreached(x *Exchange, err error) *Refusal
}
