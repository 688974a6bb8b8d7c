package federation

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/session"
)

// The hook on a routed request's answer: a server that says its list
// changed makes the federation ask again before it routes by it, and a
// server that lost the session (it restarted) is given a new one, for that
// server alone: the core sends initialize with the client's params
// (feature.Reopener), and this node remembers the new session under the
// client's session id, which the client keeps.

// Open opens the hook on the answer to a routed request.
func (d *decision) Open(*feature.Exchange) feature.Hook {
	if d.fanOut || d.server == nil || d.refusal != nil {
		return nil
	}
	return d
}

// Needs: the messages of a stream, each held until it is whole, so that
// a server's own request is given the id the client sees (stream.go); a
// list_changed noted.
func (*decision) Needs() feature.Needs { return feature.Needs{Edit: true} }

// Message gives a server's request the id the client sees, and keeps
// from the client a response of the server that answers no request the
// server was sent (it could answer one the client sent another server).
func (d *decision) Message(x *feature.Exchange, msg []byte) ([]byte, error) {
	m := oneMessage(msg)
	if m != nil && m.Kind == jsonrpc.Response {
		// A null id answers no request of anyone's: the server's own
		// error, passed as it is.
		if own := x.Single(); string(m.ID) != "null" && (own == nil || own.Kind != jsonrpc.Request || !jsonrpc.MayAnswer(own.ID, m.ID)) {
			strayResponses.WithLabelValues(d.server.name).Inc()
			return strayNote(d.server.name), nil
		}
		return nil, nil
	}
	return d.f.fromServer(d.server, msg, m), nil
}

func (*decision) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

func (*decision) End(*feature.Exchange, feature.Ending) {}

// Header puts the client's session id in the place of the server's own:
// the client holds one session, whichever server answers.
func (d *decision) Header(_ *feature.Exchange, status int, hdr http.Header) {
	if _, ok := hdr["Mcp-Session-Id"]; !ok {
		return
	}
	if d.o == nil || status < 200 {
		delete(hdr, "Mcp-Session-Id")
		return
	}
	hdr["Mcp-Session-Id"] = []string{d.o.token}
}

// Trailer keeps the server's own session id from leaving in a trailer.
func (d *decision) Trailer(_ *feature.Exchange, hdr http.Header) {
	delete(hdr, http.TrailerPrefix+"Mcp-Session-Id")
	if _, ok := hdr["Mcp-Session-Id"]; ok {
		d.Header(nil, http.StatusOK, hdr)
	}
}

// Reinitialize gives the client's initialize params, for a request to a
// server that held a session for it.
func (d *decision) Reinitialize(x *feature.Exchange) ([]byte, bool) {
	if d.o == nil || d.o.params == nil || d.o.ids[d.server.name] == "" || x.Request.Method != http.MethodPost {
		return nil, false
	}
	return d.o.params, true
}

// Reopened makes the request, and the session's later ones on this node,
// name the server's new session.
func (d *decision) Reopened(x *feature.Exchange, init *http.Request, id string) {
	if id == "" {
		return
	}
	replica := replicaOf(init)
	d.f.reopenedFor(d.o, d.server, id, replica)
	if replica != "" {
		caddyhttp.SetVar(x.Request.Context(), session.PinVar, &replica)
	}
	x.Request.Header["Mcp-Session-Id"] = []string{id}
}

// NotReopened answers for a server that lost the client's session and
// could not give it a new one yet (still starting): the model is told to
// come back, a new session is opened in the background, and the client's
// session with the other servers goes on. A 404 would end it whole.
func (d *decision) NotReopened(x *feature.Exchange, _ error) *feature.Refusal {
	if d.o == nil {
		return nil
	}
	d.f.connect(x, d.o, d.server)
	return &feature.Refusal{Envelope: connecting(d.server.name, d.f.retryAfter), Status: http.StatusServiceUnavailable}
}

// Interface guards.
var (
	_ feature.Responder   = (*decision)(nil)
	_ feature.Hook        = (*decision)(nil)
	_ feature.Reopener    = (*decision)(nil)
	_ feature.HeaderHook  = (*decision)(nil)
	_ feature.NotReopened = (*decision)(nil)
)

// strayNote is what the client gets in place of a server's response to
// no request it was sent: a log message saying so.
func strayNote(server string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"caddy-mcp","data":"the gateway kept from the client a response of the server ` + server + ` to no request it was sent"}}`)
}
