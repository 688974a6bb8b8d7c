package oauth

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words the model reads when a request's credentials are refused.
// The official clients act on the status and the challenge (they start
// their OAuth flow on a 401, and ask for the scopes a 403 names); the
// envelope is for every other reader, and for the model when its client
// hands it the error.

// authRequired: the request carried no bearer token.
func authRequired() envelope.Envelope {
	return envelope.New(envelope.AuthRequired, "Authentication required: this MCP server accepts only requests that carry an OAuth access token, and this one carried none").
		Suggest("Sign in: the client obtains an access token from the authorization server that the WWW-Authenticate header's resource_metadata names, then sends the request again with Authorization: Bearer <token>. If the client cannot sign in by itself, ask the user to sign in.").
		Envelope()
}

// malformedHeader: the Authorization header is not one bearer token.
func malformedHeader() envelope.Envelope {
	return envelope.New(envelope.Unauthorized, "Unauthorized: the Authorization header is not one bearer token (\"Authorization: Bearer <token>\", given once)").
		Suggest("Send the access token in a single header, Authorization: Bearer <token>. Retrying this request unchanged fails the same way.").
		Envelope()
}

// invalid: the token was refused for e.
func invalid(e *Error, resource string) envelope.Envelope {
	b := envelope.New(envelope.Unauthorized, "Unauthorized: the access token was refused: "+describe(e.Reason))
	switch e.Reason {
	case Expired:
		b.Suggest("Obtain a new access token (refresh it, or ask the user to sign in again), then retry the same request.")
	case WrongAudience:
		b.Suggest("Obtain an access token for this server: request it with resource=" + resource + " (RFC 8707). A token issued for another server is never accepted here.")
	default:
		b.Suggest("Obtain a new access token from this server's authorization server (ask the user to sign in again), then retry. Retrying with the same token fails the same way.")
	}
	return b.Details(envelope.Detail{Key: "reason", Value: string(e.Reason)}).Envelope()
}

// describe is why a token was refused, in words safe in a quoted
// challenge.
func describe(r Reason) string {
	switch r {
	case Expired:
		return "the token has expired"
	case NotYetValid:
		return "the token is not valid yet"
	case WrongAudience:
		return "the token was issued for another resource"
	case WrongIssuer:
		return "the token was issued by an authorization server this resource does not trust"
	case UnknownKey, BadSignature:
		return "the token's signature does not verify"
	case Inactive:
		return "the authorization server says the token is not active (revoked, expired or unknown)"
	}
	return "the token is not an access token this resource accepts"
}

// insufficientScope: the token lacks scopes every request needs.
func insufficientScope(missing, required []string) envelope.Envelope {
	return envelope.New(envelope.Forbidden, "Forbidden: the access token lacks the scope this server requires: "+strings.Join(missing, " ")).
		Suggest("Ask the user to grant the scopes " + strings.Join(required, " ") + " (the client authorizes again asking for them), then retry. Retrying with the same token fails the same way.").
		Details(envelope.Detail{Key: "required_scopes", Value: strings.Join(required, " ")}).
		Envelope()
}

// listInBatch: a list whose entries the scopes govern was asked for in a
// batch, where its answer is not edited for the caller.
func listInBatch(method string) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "This batch holds a "+method+" request, which this server answers only when it is sent alone (its answer depends on the access token's scopes); nothing in the batch ran").
		Suggest("Send " + method + " as a request of its own, then the rest of the batch.").
		Envelope()
}

// unavailable: the issuer's keys could not be fetched, or it could not be
// asked about the token, so the token cannot be checked.
func unavailable(cause error) *feature.Refusal {
	secs, words := feature.InSeconds(RefetchAfter)
	return &feature.Refusal{
		Envelope: envelope.New(envelope.ServerBusy, "Server busy: access tokens cannot be checked right now (the authorization server cannot be reached, or is asked about too many tokens), and this server runs nothing it cannot authorize").
			Suggest("Retry in " + words + ". Nothing is known to be wrong with the access token: keep it.").
			RetryAfter(float64(secs)).
			Envelope(),
		Status: 503,
		By:     feature.Rule{Kind: "authorization"},
		Cause:  cause,
	}
}

// Words are the envelopes authorization writes, for the golden list of the
// gateway's words.
func Words() []feature.Word {
	return []feature.Word{
		{Name: "no access token", Envelope: authRequired()},
		{Name: "an Authorization header that is not one bearer token", Envelope: malformedHeader()},
		{Name: "an expired access token", Envelope: invalid(&Error{Reason: Expired}, "https://mcp.example.com/mcp")},
		{Name: "an access token for another resource", Envelope: invalid(&Error{Reason: WrongAudience}, "https://mcp.example.com/mcp")},
		{Name: "an access token whose signature does not verify", Envelope: invalid(&Error{Reason: BadSignature}, "https://mcp.example.com/mcp")},
		{Name: "an access token without a required scope", Envelope: insufficientScope([]string{"tools:call"}, []string{"mcp", "tools:call"})},
		{Name: "the authorization server cannot be reached", Envelope: unavailable(nil).Envelope},
		{Name: "an opaque access token that is not active", Envelope: invalid(&Error{Reason: Inactive}, "https://mcp.example.com/mcp")},
		{Name: "a tool whose scope the access token lacks", Envelope: scopeLacking("tool", "delete_repository", []string{"repo:admin"})},
		{Name: "a list the scopes edit, in a batch", Envelope: listInBatch("tools/list")},
	}
}

// outcomes counts the decisions on requests' credentials, by outcome:
// valid, missing, insufficient_scope, or the Reason a token was refused.
// Never by subject or token.
var outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "authorization_total",
	Help: "Decisions on requests' access tokens, by outcome (valid, missing, insufficient_scope, or why a token was refused).",
}, []string{"outcome"})

// Collectors are the metrics of authorization, for a config's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{outcomes, hidden}
}
