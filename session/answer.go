package session

import (
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// opened is what the sessions keep of one request: the session its token
// opened to (if pinned), the token the client sent, and the principal a
// session the answer opens is bound to. It is the hook that seals the
// answer's session id (feature.HeaderHook), answers for a replica the
// session is pinned to that is gone (feature.Unreached), and reopens a
// session its upstream lost (feature.Reopener, reopen.go).
type opened struct {
	p       *Pins
	session Session
	token   string
	// ref names the token in the node's remap.
	ref    tokenRef
	pinned bool
	// principal points at principalBuf with Bind, and is nil without.
	principal    *Principal
	principalBuf Principal
	// sealed is the session header the client was given.
	sealed []string
}

// openings are recycled: opening a session allocates nothing.
var openings = sync.Pool{New: func() any { return new(opened) }}

// Undo recycles the request's state, once its answer is over. The pin
// stays in the request's variables, pointing into the recycled state: they
// are read after the request by goroutines of the proxy's transport (its
// dials), so they must not be written then; nothing reads the pin after
// the proxy is done with the request.
func (o *opened) Undo(time.Time, bool) { o.recycle() }

func (o *opened) recycle() {
	*o = opened{}
	openings.Put(o)
}

// Open is the hook on the request's answer: the request's state itself.
func (o *opened) Open(*feature.Exchange) feature.Hook { return o }

// Needs: no message of the answer, only its header.
func (*opened) Needs() feature.Needs { return feature.Needs{HeaderOnly: true} }

func (*opened) Message(*feature.Exchange, []byte) ([]byte, error) { return nil, nil }

func (*opened) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

func (*opened) End(*feature.Exchange, feature.Ending) {}

// Header seals the session id the upstream answered with, before the
// client sees it: with the token the client sent when it names the same
// session, or a new token naming the upstream that answered (and, on the
// answer to an initialize, carrying its params). An informational answer
// (1xx) carries none.
func (o *opened) Header(x *feature.Exchange, status int, hdr http.Header) {
	if status < 200 {
		delete(hdr, "Mcp-Session-Id") // an upstream's own id, in a 1xx
		return
	}
	o.seal(x, hdr)
	o.sealed = hdr["Mcp-Session-Id"]
}

func (o *opened) seal(x *feature.Exchange, hdr http.Header) {
	ids := hdr["Mcp-Session-Id"]
	if len(ids) == 0 {
		return
	}
	if o.pinned && ids[0] == o.session.ID {
		ids[0] = o.token // the response's own slice
		hdr["Mcp-Session-Id"] = ids[:1]
		return
	}
	p := o.p
	s := Session{Upstream: answeredBy(x.Request.Context(), x.Replacer), ID: ids[0], Issued: p.now(), Params: initializeParams(x)}
	if s.Params != nil && tokenLen(s, o.principal != nil) > MaxToken {
		s.Params = nil // a long session id leaves no room: it is not reopened
	}
	token, err := p.ring().Seal(s, o.principal)
	if err != nil {
		// Never hand out the upstream's own id: the client could not use
		// it, and it would name the session to anyone who reads it.
		delete(hdr, "Mcp-Session-Id")
		p.logger.Error("sealing a session id failed: the client gets none", zap.Error(err))
		return
	}
	tokensIssued.Inc()
	hdr["Mcp-Session-Id"] = []string{token}
}

// Trailer stops the upstream's own session id from leaving in a trailer,
// once the proxy has copied the upstream's: a declared trailer is sent from
// the header map as it is when the handler returns, and an undeclared one
// from a key with http.TrailerPrefix.
func (o *opened) Trailer(_ *feature.Exchange, hdr http.Header) {
	delete(hdr, http.TrailerPrefix+"Mcp-Session-Id")
	if o.sealed != nil {
		hdr["Mcp-Session-Id"] = o.sealed
	} else {
		delete(hdr, "Mcp-Session-Id")
	}
}

// Unreached answers for a request the selection policy found no upstream
// for because the replica its session is pinned to is gone: left the
// configuration (the session is gone: 404), or unavailable now.
func (o *opened) Unreached(x *feature.Exchange, err error) *feature.Refusal {
	miss, _ := caddyhttp.GetVar(x.Request.Context(), MissVar).(string)
	switch miss {
	case MissRemoved:
		return o.p.refusal(x, errUpstreamRemoved)
	case MissUnavailable:
		return &feature.Refusal{Envelope: replicaUnavailable(o.p.retryAfter), Status: http.StatusBadGateway, Cause: err}
	}
	return nil
}

// Interface guards.
var (
	_ feature.Admitter   = (*Pins)(nil)
	_ feature.Responder  = (*opened)(nil)
	_ feature.HeaderHook = (*opened)(nil)
	_ feature.Unreached  = (*opened)(nil)
	_ feature.Reopener   = (*opened)(nil)
)
