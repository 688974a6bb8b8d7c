// Package failures words the upstream's failures to answer in JSON-RPC:
// what the failure was (refused, down, slow, busy, failing, broken
// halfway), and so which envelope tells the model, and when to retry. The
// core finds the failures (the proxy's error, an error status held back,
// a stream that ended owing responses) and asks Failures for the words
// (feature.Failures).
package failures

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
)

// DefaultRetryAfter is the default of the delay the model is told to wait
// for an upstream that is down (the handler's upstream_retry_after).
const DefaultRetryAfter = 30 * time.Second

// Failures words the failures of an upstream, telling the model to wait
// RetryAfter for one that is down.
type Failures struct {
	RetryAfter time.Duration
}

// ErrorPage is the envelope for an error status the upstream answered
// without a JSON-RPC body, and the HTTP status for the id-less form.
func (f *Failures) ErrorPage(status int, hdr http.Header, body []byte) (envelope.Envelope, int) {
	answered := fmt.Sprintf("it answered %d %s", status, http.StatusText(status))
	switch status {
	case http.StatusBadGateway:
		return Unavailable(answered, f.RetryAfter), status
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

// Unreached is the envelope for an error reverse_proxy returned before
// writing anything: the upstream could not be reached, or was and did not
// answer; ok is false for an error that is no such failure.
//
// A call that never reached a server (the connection refused, or no
// healthy upstream: reverse_proxy's DialError and 503) is safe to retry,
// after RetryAfter. One the proxy sent and whose connection then broke (a
// 502 with any other cause: EOF, a reset) may have run: the server may
// have died in the middle of it, or after it, so the model is told to
// check its effect rather than to retry.
func (f *Failures) Unreached(err error) (env envelope.Envelope, status int, ok bool) {
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) {
		return envelope.Envelope{}, 0, false
	}
	retry := f.RetryAfter
	var dial reverseproxy.DialError
	var ne net.Error
	switch {
	case errors.As(err, &dial):
		return Unavailable("the connection was refused", retry), http.StatusBadGateway, true
	case he.StatusCode == http.StatusGatewayTimeout || (errors.As(err, &ne) && ne.Timeout()):
		return upstreamTimedOut(""), http.StatusGatewayTimeout, true
	case he.StatusCode == http.StatusServiceUnavailable:
		return Unavailable("no healthy upstream", retry), http.StatusBadGateway, true
	case he.StatusCode == http.StatusBadGateway:
		return brokenAfterSent(), http.StatusBadGateway, true
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

// Broken is the envelope that closes an answer the upstream broke, or
// ended without the responses it owed: what says which. The call reached
// the server, and may have run.
func (f *Failures) Broken(what string) envelope.Envelope {
	return streamBroken(what)
}
