package feature

import (
	"net/http"
	"strings"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// The two eras of MCP's Streamable HTTP transport, and everything the
// handler does differently in each. A request's era is the one its
// MCP-Protocol-Version header declares.
//
// MCP 2025-03-26 to 2025-11-25 (the session era): a client opens a session
// with initialize; a POST answered with an event stream can be resumed with
// Last-Event-ID when its events carry ids; closing a stream does not cancel
// the request; a 404 means the session is gone.
//
// MCP 2026-07-28 (the stateless era): no sessions and no initialize; every
// POST mirrors its method, and the name it acts on, in headers the body must
// agree with; a stream cannot be resumed, and closing it is the request's
// cancellation; a 404 with -32601 is an unknown method; error codes -32000
// to -32019 are legacy and -32020 to -32099 are the specification's.
//
// List results of the stateless era (tools/list and the others) carry ttlMs
// and cacheScope. The gateway keeps nothing from an answer today; whatever
// comes to learn from them (a tool's schema, its policy) must keep a result
// whose cacheScope is private to the authorization context it was answered
// in, and never apply it to another client.
type Era uint8

const (
	SessionEra Era = iota
	StatelessEra
)

// StatelessSince is the first protocol version of the stateless era.
const StatelessSince = "2026-07-28"

// EraOf is the era of r. Only a version written as a date counts: any other
// value (a typo, or a client's attempt to be read under the other era's
// rules) is read as the session era, which holds places until the upstream
// has answered and trusts no header over the body.
func EraOf(r *http.Request) Era {
	v := strings.Trim(r.Header.Get("Mcp-Protocol-Version"), " \t")
	if isVersionDate(v) && v >= StatelessSince {
		return StatelessEra
	}
	return SessionEra
}

// isVersionDate reports whether v has the form of an MCP protocol version,
// YYYY-MM-DD, so that versions compare as their text.
func isVersionDate(v string) bool {
	if len(v) != len("2006-01-02") {
		return false
	}
	for i := range len(v) {
		if i == 4 || i == 7 {
			if v[i] != '-' {
				return false
			}
		} else if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// ClosingCancels reports whether the specification makes closing the
// response stream the request's cancellation. Servers do not all follow
// it (the Go SDK's goes on running a call unless told to propagate
// cancellation), so the guard frees places early only where the operator
// says the upstream stops (Handler.UpstreamCancelsOnClose).
func (e Era) ClosingCancels() bool { return e == StatelessEra }

// Resumes reports whether a client may resume a broken event stream whose
// events carried ids; in the stateless era it cannot, so the gateway
// answers for a broken stream whatever its events carried.
func (e Era) Resumes() bool { return e == SessionEra }

// RequiresMirrors reports whether a request must carry the Mcp-Method
// header, and Mcp-Name where its method names something (see
// internal/mirror).
func (e Era) RequiresMirrors() bool { return e == StatelessEra }

// RPCCode is the JSON-RPC error code that carries env in answer to a request
// that is not a tools/call. The session era's clients know the gateway's
// answers by -32000 (the envelope says what happened). In the stateless era
// that code is legacy and -32000 to -32099 belong to the specification, so
// each envelope code gets an application code of its own, outside
// -32768..-32000: the HTTP status that says the same, as other MCP gateways
// answer a rate limit with 429. docs/model.md lists them.
func (e Era) RPCCode(env *envelope.Envelope) int {
	if e == SessionEra {
		return envelope.CodeServerError
	}
	if c, ok := statelessCodes[env.Code]; ok {
		return c
	}
	return http.StatusInternalServerError
}

// statelessCodes are the application error codes of the stateless era, one
// per envelope code the gateway answers with. They are part of the wire
// contract: never change one.
var statelessCodes = map[envelope.Code]int{
	envelope.ValidationError:            http.StatusBadRequest,          // 400: the request itself is refused
	envelope.Forbidden:                  http.StatusForbidden,           // 403: the Origin is not allowed
	envelope.RateLimited:                http.StatusTooManyRequests,     // 429: a rate limit
	envelope.InternalError:              http.StatusInternalServerError, // 500: the upstream failed
	envelope.HandoffUpstreamUnavailable: http.StatusBadGateway,          // 502: the upstream cannot be reached
	envelope.ServerBusy:                 http.StatusServiceUnavailable,  // 503: the guard, or a busy upstream
	envelope.Timeout:                    http.StatusGatewayTimeout,      // 504: the upstream took too long
}
