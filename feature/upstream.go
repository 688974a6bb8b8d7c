package feature

// What the handlers of an upstream route (the handler's next, or a
// federated server's route) and the core tell each other.

// ServerVar is the request variable naming the federated server a request
// goes to, set by the router that holds the server's route before the
// route runs: the handlers in it (a server's credential) say in their
// words which server they speak of.
const ServerVar = "caddy_mcp.server"

// Refused is what a handler of an upstream route returns instead of
// sending the request on (a server whose credential could not be
// obtained): the core answers the request with its Refusal, as it answers
// a check's, in the form each request needs.
type Refused struct {
	Refusal
}

// Error is the refusal's envelope's message.
func (r *Refused) Error() string {
	if r.Cause != nil {
		return r.Envelope.Message + ": " + r.Cause.Error()
	}
	return r.Envelope.Message
}

// Unwrap is the refusal's cause.
func (r *Refused) Unwrap() error { return r.Cause }

// Credential is implemented by a handler of an upstream route that gives
// the server a credential of its own (package credential): Use says how
// (token_exchange, client_credentials, header, passthrough, none), and
// resource the resource identifier the credential is for, "" when it does
// not say. A router that holds several servers' routes reads it when its
// config loads, to refuse one that would get the caller's token for the
// gateway.
type Credential interface {
	Credential() (use, resource string)
}
