package session

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/failures"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// What the client and the model are told when a session cannot be used.

// goneCode is the JSON-RPC error code of a 404 for a session that is not
// found, the code the TypeScript SDK's server answers with.
const goneCode = -32001

// refusal is the answer to a request whose session did not open for err:
// HTTP 404, which tells MCP clients to initialize a new session, with a
// JSON-RPC error for the request's id (null when the body holds none, or
// several); or, for an initialize that gives no principal to bind its
// session to, the envelope that says so.
func (p *Pins) refusal(x *feature.Exchange, err error) *feature.Refusal {
	if errors.Is(err, errNoPrincipal) {
		sessionTokens.WithLabelValues("no_principal").Inc()
		return &feature.Refusal{Envelope: noPrincipal(), Status: http.StatusForbidden}
	}
	outcome := "invalid"
	switch {
	case errors.Is(err, ErrExpired):
		outcome = "expired"
	case errors.Is(err, ErrPrincipal):
		outcome = "other_principal"
	case errors.Is(err, errUpstreamRemoved):
		outcome = "upstream_removed"
	}
	sessionTokens.WithLabelValues(outcome).Inc()
	if c := p.logger.Check(zap.DebugLevel, "session not found"); c != nil {
		c.Write(zap.String("reason", outcome), zap.Error(err))
	}
	id := json.RawMessage("null")
	requests := 0
	for i := range x.Messages {
		if x.Messages[i].Kind == jsonrpc.Request {
			requests++
			id = x.Messages[i].ID
		}
	}
	if requests != 1 || x.Batch {
		id = json.RawMessage("null")
	}
	message := "Session not found: " + err.Error() + "; initialize a new session"
	if errors.Is(err, ErrPrincipal) || errors.Is(err, ErrMalformed) {
		// The same words for both: which one would tell a thief that a
		// stolen token is valid.
		message = "Session not found: not a session of this gateway for these credentials; initialize a new session"
	}
	body := envelope.AppendPlainRPCError(make([]byte, 0, 160), id, goneCode, message)
	return &feature.Refusal{Cause: err, Plain: &feature.Plain{
		Status:  http.StatusNotFound,
		Header:  http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}},
		Body:    body,
		Outcome: "SESSION_NOT_FOUND",
	}}
}

// noPrincipal: sessions are bound to the caller's credentials, and the
// initialize request carried none.
func noPrincipal() envelope.Envelope {
	return envelope.New(envelope.Forbidden, "This MCP gateway opens sessions only for authenticated clients, and the request carried no credentials").
		Suggest("Tell the user to configure credentials for this tool server; do not retry without them.").
		Envelope()
}

// replicaUnavailable: the replica a session is pinned to is configured,
// but not available now.
func replicaUnavailable(retry time.Duration) envelope.Envelope {
	return failures.Unavailable("the server that holds this session is not available now", retry)
}

// Words are the envelopes the sessions write, with an example's values,
// for the golden list of the gateway's words.
func Words() []feature.Word {
	return []feature.Word{
		{Name: "an initialize that gives no principal to bind its session to", Envelope: noPrincipal()},
		{Name: "the replica a session is pinned to is unavailable", Envelope: replicaUnavailable(30 * time.Second)},
	}
}
