package feature

import (
	"net/http"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// Failures words the upstream's failures (package failures is the one the
// handler plugs). The core finds them: the proxy could not reach the
// upstream, an error status came without JSON-RPC, an answer broke or
// ended without the responses it owed. It asks Failures what the model is
// told, and writes it in the form each request needs. What the upstream
// says in JSON-RPC itself, error or not, is never a failure: it passes.
type Failures interface {
	// Unreached is the envelope for an error the proxy returned before
	// anything was written, err, and the HTTP status of its id-less form;
	// ok is false for an error that is no failure of the upstream's (the
	// core passes it on).
	Unreached(err error) (env envelope.Envelope, status int, ok bool)
	// ErrorPage is the envelope for an error status (5xx, 429) the
	// upstream answered without JSON-RPC, given its header and the start
	// of its body, and the HTTP status of its id-less form.
	ErrorPage(status int, h http.Header, body []byte) (envelope.Envelope, int)
	// Broken is the envelope that closes an answer the upstream broke, or
	// ended without the responses it owed; what says which.
	Broken(what string) envelope.Envelope
}
