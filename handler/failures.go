package handler

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Upstream failures: what the upstream's failure to answer in JSON-RPC was
// (refused, down, slow, busy, failing), and so which envelope tells it.

// DefaultUpstreamRetryAfter is the default of Handler.UpstreamRetryAfter.
const DefaultUpstreamRetryAfter = 30 * time.Second

// upstreamStatus is the envelope for an error status the upstream answered
// without a JSON-RPC body, and the HTTP status for the id-less form.
func (h *Handler) upstreamStatus(status int, hdr http.Header, body []byte) (envelope.Envelope, int) {
	answered := fmt.Sprintf("it answered %d %s", status, http.StatusText(status))
	switch status {
	case http.StatusBadGateway:
		return upstreamUnavailable(answered, time.Duration(h.UpstreamRetryAfter)), status
	case http.StatusGatewayTimeout:
		return upstreamTimedOut(answered), status
	case http.StatusServiceUnavailable:
		retry, known := parseRetryAfter(hdr.Get("Retry-After"), time.Now())
		return upstreamBusy(answered, retry, known), status
	case http.StatusTooManyRequests:
		retry, known := parseRetryAfter(hdr.Get("Retry-After"), time.Now())
		return upstreamRateLimited(answered, retry, known), status
	}
	return upstreamFailed(status, answered, bodyExcerpt(body)), status
}

// proxyFailure is the envelope for an error reverse_proxy returned before
// writing anything: the upstream could not be reached or did not answer.
func (h *Handler) proxyFailure(err error) (envelope.Envelope, int, bool) {
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) {
		return envelope.Envelope{}, 0, false
	}
	retry := time.Duration(h.UpstreamRetryAfter)
	var dial reverseproxy.DialError
	var ne net.Error
	switch {
	case errors.As(err, &dial):
		return upstreamUnavailable("the connection was refused", retry), http.StatusBadGateway, true
	case he.StatusCode == http.StatusGatewayTimeout || (errors.As(err, &ne) && ne.Timeout()):
		return upstreamTimedOut(""), http.StatusGatewayTimeout, true
	case he.StatusCode == http.StatusServiceUnavailable:
		return upstreamUnavailable("no healthy upstream", retry), http.StatusBadGateway, true
	case he.StatusCode == http.StatusBadGateway:
		return upstreamUnavailable("", retry), http.StatusBadGateway, true
	}
	return envelope.Envelope{}, 0, false
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date,
// at most a year away.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}

// maxRetryAfter bounds a delay an upstream asks for.
const maxRetryAfter = 365 * 24 * time.Hour

// maxExcerpt is how much of an upstream's error body the model is shown.
const maxExcerpt = 200

// bodyExcerpt is the start of an error body, as one line of valid UTF-8. It
// is escaped like any envelope text when rendered, so it cannot break out of
// its <detail>.
func bodyExcerpt(body []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body[:min(len(body), 4*maxExcerpt)]), "\uFFFD")), " ")
	if len(s) <= maxExcerpt {
		return s
	}
	cut := maxExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

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
	env, status := h.upstreamStatus(u.status, u.Header(), u.heldBody)
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
