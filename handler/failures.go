package handler

import (
	"github.com/caddymcp/caddy-mcp/internal/failures"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// An error answer held back (watch.go): passed as the upstream wrote it
// when it is JSON-RPC, replaced by the envelope for its status otherwise
// (in the words of feature.Failures, package failures).

// DefaultUpstreamRetryAfter is the default of Handler.UpstreamRetryAfter.
const DefaultUpstreamRetryAfter = failures.DefaultRetryAfter

// release sends a held answer as the upstream wrote it.
func (u *upstreamWatch) release() error {
	u.held = false
	u.ResponseWriterWrapper.WriteHeader(u.status)
	_, err := u.ResponseWriterWrapper.Write(u.heldBody)
	u.heldBody = nil
	return err
}

// replaceHeld decides what a held error answer was. The upstream's own
// JSON-RPC messages pass through untouched; anything else (an HTML error
// page, a plain-text stack trace, nothing) becomes the envelope for its
// status.
func (h *Handler) replaceHeld(u *upstreamWatch) error {
	if isJSONRPC(u.heldBody) {
		return u.release()
	}
	env, status := h.failures.ErrorPage(u.status, u.Header(), u.heldBody)
	u.held = false
	clearEntityHeaders(u.Header())
	return h.answer(u.ResponseWriterWrapper.ResponseWriter, u.x, &env, status)
}

// isJSONRPC reports whether body is JSON holding JSON-RPC messages.
func isJSONRPC(body []byte) bool {
	found := false
	_, err := jsonrpc.Each(body, func(m jsonrpc.Message) error {
		found = found || m.Kind != jsonrpc.Invalid
		return nil
	})
	return err == nil && found
}
