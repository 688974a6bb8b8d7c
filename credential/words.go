package credential

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words the model reads when a server's credential cannot be
// obtained. Each names the server (a federated server by its name), so
// that the model knows which of its tools are concerned, and says what
// the user, or the model, can do: the issuer's refusal is the user's to
// lift; an issuer out of reach is waited for.

// issuerError is the issuer's refusal to give a token (RFC 6749 §5.2), or
// an answer the gateway would not give a server (broken).
type issuerError struct {
	code, description string
	// broken: the issuer answered, with what the gateway does not pass
	// on (the caller's own token, a token for another audience).
	broken bool
	// own: the refusal of the gateway's own token (client credentials),
	// which is no user's to lift.
	own bool
}

// newIssuerError is the issuer's error, its words clipped: an issuer's
// answer may be a megabyte, and what is remembered of it is bounded.
func newIssuerError(code, description string, own bool) *issuerError {
	return &issuerError{code: clip(code), description: clip(description), own: own}
}

func (e *issuerError) Error() string {
	if e.description == "" {
		return "the issuer answered " + e.code
	}
	return "the issuer answered " + e.code + ": " + e.description
}

// signIn reports whether the issuer refused the caller's token itself:
// the user signs in again (and consents).
func (e *issuerError) signIn() bool {
	switch e.code {
	case "invalid_grant", "login_required", "invalid_token":
		return !e.broken && !e.own
	}
	return false
}

// refused reports whether the issuer refused the caller: their token is
// no longer good for an exchange (signIn), or the user lacks the rights
// or the consent for the server.
func (e *issuerError) refused() bool {
	switch e.code {
	case "access_denied", "consent_required", "interaction_required", "invalid_target", "invalid_scope":
		return !e.broken && !e.own
	}
	return e.signIn()
}

// gateways reports whether e is the gateway's to fix, whoever called: its
// client refused (its credentials, its grants), its own token refused, or
// an answer it cannot use. Any other error is the caller's own, and is
// remembered for the caller's token only: no caller can make the server
// unavailable to the others.
func (e *issuerError) gateways() bool {
	switch e.code {
	case "invalid_client", "unauthorized_client", "unsupported_grant_type":
		return true
	}
	return e.broken || e.own
}

// outcome is the metric's word for e.
func (e *issuerError) outcome() string {
	switch {
	case e.broken:
		return "broken"
	case e.refused():
		return "refused"
	case e.gateways():
		return "misconfigured"
	}
	return "failed"
}

// refusal is what the model is told of e for server.
func (e *issuerError) refusal(server string) *feature.Refused {
	said := envelope.Detail{Key: "issuer_said", Value: clip(e.Error())}
	switch {
	case e.signIn():
		return refuse(http.StatusForbidden, e, envelope.New(envelope.AuthRequired,
			"Authentication required: the authorization server would not give "+named(server)+" a token on the user's behalf").
			Suggest("Ask the user to sign in again, and to consent at the authorization server to the use of "+named(server)+", then retry"+others(server)+".").
			Details(serverDetail(server), said))
	case e.refused():
		return refuse(http.StatusForbidden, e, envelope.New(envelope.Forbidden,
			"Forbidden: the user may not use "+named(server)+": the authorization server refused a token for it").
			Suggest("Tell the user they lack access to "+named(server)+", and that an administrator of the authorization server can grant it. Do not retry until then"+others(server)+".").
			Details(serverDetail(server), said))
	}
	return refuse(http.StatusBadGateway, e, unavailableWords(server, time.Minute,
		"the gateway could not obtain its credential: the authorization server's answer could not be used"))
}

// unavailable: the issuer could not be asked, or did not answer in time.
func unavailable(server string, retry time.Duration, cause error) *feature.Refused {
	return refuse(http.StatusBadGateway, cause, unavailableWords(server, retry,
		"the authorization server that gives it its credential is out of reach"))
}

// limited: the issuer is asked for tokens at the rate allowed already.
func limited(server string) *feature.Refused {
	return refuse(http.StatusServiceUnavailable, errLimited, envelope.New(envelope.ServerBusy,
		"Server busy: the gateway is asking the authorization server for as many tokens as it may, and could not obtain a credential for "+named(server)+" now").
		Suggest("Retry in 1 second.").RetryAfter(1).Details(serverDetail(server)))
}

// unverified: a token exchange for a request whose caller nobody
// verified (the mcp handler has no authorization).
func unverified(server string) *feature.Refused {
	return refuse(http.StatusBadGateway, nil, unavailableWords(server, time.Minute,
		"the gateway exchanges the caller's token for its credential, and verified none (configure authorization)"))
}

// otherIssuer: the caller's token is another issuer's than the one that
// exchanges it, and is not sent there.
func otherIssuer(server, issuer string) *feature.Refused {
	return refuse(http.StatusForbidden, nil, envelope.New(envelope.AuthRequired,
		"Authentication required: "+named(server)+" accepts only users of the authorization server "+issuer+", and the user signed in elsewhere").
		Suggest("Ask the user to sign in at "+issuer+" to use "+named(server)+others(server)+".").
		Details(serverDetail(server)))
}

func unavailableWords(server string, retry time.Duration, why string) *envelope.Builder {
	secs, in := feature.InSeconds(retry)
	return envelope.New(envelope.HandoffUpstreamUnavailable, "The MCP server "+quoted(server)+"is unavailable: "+why).
		Suggest("Tell the user " + named(server) + " is unavailable, and retry in " + in + others(server) + ".").
		RetryAfter(float64(secs)).Details(serverDetail(server))
}

func refuse(status int, cause error, b *envelope.Builder) *feature.Refused {
	return &feature.Refused{Refusal: feature.Refusal{Envelope: b.Envelope(), Status: status, Cause: cause}}
}

// named is how the words name server.
func named(server string) string {
	if server == "" {
		return "the MCP server"
	}
	return "the MCP server " + fmt.Sprintf("%q", server)
}

// others is what the words add for a federated server: the others'
// tools are not concerned.
func others(server string) string {
	if server == "" {
		return ""
	}
	return "; the tools of the other servers remain available"
}

func quoted(server string) string {
	if server == "" {
		return ""
	}
	return fmt.Sprintf("%q ", server)
}

func serverDetail(server string) envelope.Detail {
	if server == "" {
		server = "the MCP server"
	}
	return envelope.Detail{Key: "server", Value: server}
}

// maxSaid is how much of what an issuer says the model and the log are
// shown.
const maxSaid = 200

// clip is s as one line of valid UTF-8, at most maxSaid bytes.
func clip(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s[:min(len(s), 4*maxSaid)], "\uFFFD")), " ")
	if len(s) <= maxSaid {
		return s
	}
	cut := maxSaid
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Words are the envelopes of this package, with an example's values, for
// the golden list of every word of the gateway.
func Words() []feature.Word {
	said := func(code string) *issuerError {
		return &issuerError{code: code, description: "the user has not consented to https://crm.internal"}
	}
	word := func(name string, r *feature.Refused) feature.Word {
		return feature.Word{Name: "credential: " + name, Envelope: r.Envelope}
	}
	return []feature.Word{
		word("the issuer refused the user's token (invalid_grant)", said("invalid_grant").refusal("crm")),
		word("the issuer refused the user a token for the server (access_denied…)", said("access_denied").refusal("crm")),
		word("the gateway's client refused, or an answer not passed on", (&issuerError{code: "unchanged_token", broken: true}).refusal("crm")),
		word("the issuer out of reach", unavailable("crm", downFor, nil)),
		word("the issuer asked at its rate", limited("crm")),
		word("no verified caller to exchange for", unverified("crm")),
		word("a user of another issuer", otherIssuer("crm", "https://auth.example.com")),
		word("a site's one server", said("access_denied").refusal("")),
	}
}
