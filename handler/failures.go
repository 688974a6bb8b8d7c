package handler

import (
	"github.com/caddymcp/caddy-mcp/internal/failures"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// An error answer held back (answer.Held): passed as the upstream wrote it
// when it is JSON-RPC, replaced by the envelope for its status otherwise
// (in the words of feature.Failures, package failures).

// DefaultUpstreamRetryAfter is the default of Handler.UpstreamRetryAfter.
const DefaultUpstreamRetryAfter = failures.DefaultRetryAfter

// isJSONRPC reports whether body is JSON holding JSON-RPC messages.
func isJSONRPC(body []byte) bool {
	found := false
	_, err := jsonrpc.Each(body, func(m jsonrpc.Message) error {
		found = found || m.Kind != jsonrpc.Invalid
		return nil
	})
	return err == nil && found
}
