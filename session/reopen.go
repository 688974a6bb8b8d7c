package session

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// A stateful server that restarts loses its sessions, and answers 404 to
// their ids; no official client opens a new session then. A token carries
// the params of the client's initialize, so that the core can open the
// session anew on the same upstream for the client (feature.Reopener),
// while the client keeps its token: the remap (remap.go) sends its next
// requests to the new session.

// maxInit bounds the initialize params a token carries, compacted: a
// client's are a few hundred bytes, and the token travels on every
// request. A session opened with larger ones is not reopened.
const maxInit = 2 << 10

// maxInitRead bounds the params compacted to find whether they fit in
// maxInit: whitespace may make them longer as sent, not four times.
const maxInitRead = 4 * maxInit

// initializeParams are the params of x's request, compacted, when it is
// one initialize request (not in a batch) whose params are a JSON object
// of at most maxInit bytes; nil otherwise.
func initializeParams(x *feature.Exchange) []byte {
	m := x.Single()
	if m == nil || m.Kind != jsonrpc.Request || string(m.Method) != "initialize" || x.Body == nil {
		return nil
	}
	var raw []byte
	err := jsonrpc.Members(x.Body, func(member jsonrpc.Member) bool {
		if string(member.Key) != "params" {
			return true
		}
		raw = x.Body[member.Start:member.End]
		return false
	})
	if err != nil || len(raw) == 0 || raw[0] != '{' || len(raw) > maxInitRead {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.Len() > maxInit {
		return nil
	}
	return b.Bytes()
}

// Reinitialize returns the params of the client's initialize, as its
// token carries them, for a request of a pinned session that is sent
// again once the session is reopened: a POST, or the GET of its stream.
// A DELETE's 404 is what it asked for: the session is gone. The params
// are the bytes of the opened token, which nothing writes: the caller
// must not write them either.
func (o *opened) Reinitialize(x *feature.Exchange) ([]byte, bool) {
	if !o.pinned || o.session.Params == nil {
		return nil, false
	}
	switch x.Request.Method {
	case http.MethodPost, http.MethodGet:
		return o.session.Params, true
	}
	return nil, false
}

// Reopened makes x's request name the session the upstream opened anew
// with id, answering r (the initialize the core sent): its header, its
// pin and x's Replica name it, and so does this node's remap, for the
// requests that follow under the same token. The answer to x seals id
// back to the token the client sent. An id that is empty names no
// session: nothing changes, and the request meets the same 404.
func (o *opened) Reopened(x *feature.Exchange, r *http.Request, id string) {
	if !o.pinned || id == "" {
		return
	}
	upstream := answeredBy(r.Context(), replacerOf(r))
	if upstream == "" {
		upstream = o.session.Upstream // where the core pinned the initialize
	}
	o.session.Upstream, o.session.ID = upstream, id
	x.Request.Header["Mcp-Session-Id"] = []string{id}
	x.Replica = upstream
	// The pin points at o.session.Upstream already; the variables are
	// written only if it does not.
	if pin, _ := caddyhttp.GetVar(x.Request.Context(), PinVar).(*string); pin != &o.session.Upstream {
		caddyhttp.SetVar(x.Request.Context(), PinVar, &o.session.Upstream)
	}
	p := o.p
	p.remap.keep(o.ref, upstream, id, o.session.Issued.Add(p.ttl), p.now())
	sessionsReopened.Inc()
}

// answeredBy is the upstream a request went to: the one the selection
// policy mcp_session chose (SelectedVar in ctx), or when another policy
// chose, the address the proxy dialled, read with repl (nil: none).
func answeredBy(ctx context.Context, repl feature.Replacer) string {
	if selected, ok := caddyhttp.GetVar(ctx, SelectedVar).(*string); ok {
		return *selected
	}
	if repl == nil {
		return ""
	}
	return repl.ReplaceAll("{http.reverse_proxy.upstream.hostport}", "")
}

// replacerOf is r's replacer, nil when it has none.
func replacerOf(r *http.Request) feature.Replacer {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		return repl
	}
	return nil
}
