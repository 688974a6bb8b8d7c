package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// DefaultUpstreamRetryAfter is the default of Handler.UpstreamRetryAfter.
const DefaultUpstreamRetryAfter = 30 * time.Second

// maxHeldBody bounds the error body held back from the client while the
// handler decides whether it is the upstream's own JSON-RPC answer (passed
// through) or an error page (replaced by an envelope). A longer body is
// passed through as it is.
const maxHeldBody = 64 << 10

// forward hands the request to the next handler (reverse_proxy) and turns
// what the upstream could not say for itself into envelopes: a proxy error
// returned before anything was written, an error status whose body is not
// JSON-RPC, and an SSE answer that ended before the response it owed.
func (h *Handler) forward(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) (err error) {
	x.forwarded = true
	watch := &x.watch
	*watch = upstreamWatch{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, x: x, keepaliveEvery: time.Duration(h.SSEKeepalive)}
	up := x.r
	if len(x.slots) > 0 && !closingCancels(x.r) {
		// The request holds places in the guard, and its upstream goes on
		// running it when the client leaves (before MCP 2026-07-28, closing
		// the connection does not cancel a call). The places must then be
		// held until the upstream has answered: the upstream request is cut
		// loose from the client's, and its answer is read to its end, into
		// nothing once the client is gone.
		up = x.r.WithContext(context.WithoutCancel(x.r.Context()))
		watch.drain = true
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		watch.stopKeepalive()
		// reverse_proxy panics with ErrAbortHandler when the upstream
		// breaks a response it has started. An error answer still held back
		// has not reached the client, and an SSE answer that owes a
		// response and cannot be resumed is ended by the gateway instead.
		if v == http.ErrAbortHandler && x.r.Context().Err() == nil {
			switch {
			case watch.held:
				err = h.replaceHeld(watch)
				return
			case watch.sse != nil && watch.sse.repairable():
				err = h.repairStream(watch, "the connection to the MCP server broke")
				return
			}
		}
		panic(v)
	}()
	err = next.ServeHTTP(watch, up)
	watch.stopKeepalive()
	switch {
	case watch.held:
		return h.replaceHeld(watch)
	case err != nil && watch.status == 0:
		if env, status, ok := h.proxyFailure(err); ok {
			x.cause = err
			return h.answer(w, x, &env, status)
		}
	case err == nil && watch.sse != nil && x.r.Context().Err() == nil && watch.sse.repairable():
		return h.repairStream(watch, "the MCP server ended its answer without responding")
	}
	return err
}

// upstreamWatch stands between reverse_proxy and the client for one request.
// Everything passes through as it is written, and flushes as they happen,
// except a 5xx or 429 answer that does not declare itself an event stream:
// that is held back (at most maxHeldBody) until the handler knows whether the
// upstream spoke JSON-RPC.
type upstreamWatch struct {
	caddyhttp.ResponseWriterWrapper
	x *exchange
	// status is the final status written, 0 until then.
	status   int
	held     bool
	heldBody []byte
	// overflow: a held error page outgrew maxHeldBody; its rest is dropped.
	overflow bool
	// sse follows an event-stream answer to a POST that holds requests.
	sse *sseTracker
	// keepaliveEvery is how long an event stream may stay idle before a
	// comment line is sent; ka runs it (nil when off or not a stream).
	keepaliveEvery time.Duration
	ka             *keepalive
	// drain: the answer is read to its end even when the client is gone;
	// gone: it is, and what the upstream writes is dropped.
	drain, gone bool
}

// closingCancels reports whether the request's protocol version (MCP
// 2026-07-28 and later) makes closing its response stream the cancellation
// of the call, so that the upstream stops working on it when the client
// leaves.
func closingCancels(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
}

func (u *upstreamWatch) WriteHeader(status int) {
	if status < 200 || u.status != 0 {
		u.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	u.status = status
	hdr := u.Header()
	eventStream, readable := isEventStream(hdr), identityEncoded(hdr)
	if (status >= 500 || status == http.StatusTooManyRequests) && !eventStream && readable {
		u.held = true
		return
	}
	// An event stream is followed, and kept alive, only when its bytes are
	// the events themselves: the gateway cannot read a compressed stream,
	// and anything it wrote into one would corrupt it.
	followed := eventStream && readable && status == http.StatusOK
	if followed {
		u.sse = newSSETracker(u.x.msgs)
	}
	u.ResponseWriterWrapper.WriteHeader(status)
	if followed && u.keepaliveEvery > 0 {
		u.startKeepalive(u.keepaliveEvery)
	}
}

func (u *upstreamWatch) Write(p []byte) (int, error) {
	if u.status == 0 {
		u.WriteHeader(http.StatusOK)
	}
	if u.held {
		if u.overflow || len(u.heldBody)+len(p) <= maxHeldBody {
			if !u.overflow {
				u.heldBody = append(u.heldBody, p...)
			}
			return len(p), nil
		}
		if !startsLikeJSON(u.heldBody) {
			// An error page, not the upstream speaking JSON-RPC: what is
			// held is enough for the excerpt, and the rest is dropped.
			u.overflow = true
			return len(p), nil
		}
		if err := u.release(); err != nil {
			return 0, err
		}
	}
	if u.sse != nil {
		u.sse.observe(p)
	}
	return u.write(p)
}

// ReadFrom keeps bytes flowing through Write, where they are watched.
func (u *upstreamWatch) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{u}, r)
}

// FlushError flushes, except while an answer is held back: flushing then
// would send a 200 header before the handler has decided.
func (u *upstreamWatch) FlushError() error {
	if u.held {
		return nil
	}
	return u.flush()
}

// startsLikeJSON reports whether body could begin a JSON-RPC message or
// batch, which is then passed through however long it is.
func startsLikeJSON(body []byte) bool {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return true
}

// release sends a held answer as the upstream wrote it.
func (u *upstreamWatch) release() error {
	u.held = false
	u.ResponseWriterWrapper.WriteHeader(u.status)
	_, err := u.ResponseWriterWrapper.Write(u.heldBody)
	u.heldBody = nil
	return err
}

type writerOnly struct{ io.Writer }

func isEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
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

// clearEntityHeaders removes what the upstream said about the body it sent,
// before the handler sends another. Other headers (Mcp-Session-Id above all)
// stay.
func clearEntityHeaders(h http.Header) {
	for _, k := range []string{
		"Content-Type", "Content-Length", "Content-Encoding", "Content-Language",
		"Content-Range", "Content-Disposition", "Content-Location", "Etag",
		"Last-Modified", "Transfer-Encoding", "Retry-After", "Trailer",
	} {
		h.Del(k)
	}
}

// upstreamStatus is the envelope for an error status the upstream answered
// without a JSON-RPC body, and the HTTP status for the id-less form.
func (h *Handler) upstreamStatus(status int, hdr http.Header, body []byte) (envelope.Envelope, int) {
	answered := fmt.Sprintf("it answered %d %s", status, http.StatusText(status))
	switch status {
	case http.StatusBadGateway:
		return h.unavailable("The MCP server behind this gateway is unavailable: " + answered), http.StatusBadGateway
	case http.StatusGatewayTimeout:
		return timedOut("The MCP server did not answer in time: " + answered), http.StatusGatewayTimeout
	case http.StatusServiceUnavailable:
		b := envelope.New(envelope.ServerBusy, "The MCP server is busy: "+answered)
		if d, ok := parseRetryAfter(hdr.Get("Retry-After"), h.now()); ok {
			secs := wholeSeconds(d)
			b.Suggest(fmt.Sprintf("Reduce concurrent calls: send them one at a time, and retry this one in %s.", plural(secs, "second"))).
				RetryAfter(float64(secs))
		} else {
			b.Suggest("Reduce concurrent calls: send them one at a time, and retry this one later.")
		}
		return b.Details(envelope.Detail{Key: "upstream_status", Value: "503"}).Envelope(), http.StatusServiceUnavailable
	case http.StatusTooManyRequests:
		b := envelope.New(envelope.RateLimited, "The MCP server refused the call: too many requests ("+answered+")")
		if d, ok := parseRetryAfter(hdr.Get("Retry-After"), h.now()); ok {
			secs := wholeSeconds(d)
			b.Suggest(fmt.Sprintf("Wait %s, then retry the same call.", plural(secs, "second"))).RetryAfter(float64(secs))
		} else {
			b.Suggest("Wait before retrying the same call; the server did not say how long.")
		}
		return b.Details(envelope.Detail{Key: "upstream_status", Value: "429"}).Envelope(), http.StatusTooManyRequests
	}
	b := envelope.New(envelope.InternalError, "The tool failed inside the MCP server: "+answered).
		Suggest("Do not blindly retry: the same call is likely to fail the same way. Tell the user what failed, or try another approach.").
		Details(envelope.Detail{Key: "upstream_status", Value: strconv.Itoa(status)})
	if excerpt := bodyExcerpt(body); excerpt != "" {
		b.Details(envelope.Detail{Key: "upstream_body", Value: excerpt})
	}
	return b.Envelope(), status
}

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

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(365*24*time.Hour/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// proxyFailure is the envelope for an error reverse_proxy returned before
// writing anything: the upstream could not be reached or did not answer.
func (h *Handler) proxyFailure(err error) (envelope.Envelope, int, bool) {
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) {
		return envelope.Envelope{}, 0, false
	}
	var dial reverseproxy.DialError
	var ne net.Error
	switch {
	case errors.As(err, &dial):
		return h.unavailable("The MCP server behind this gateway is unavailable: the connection was refused"), http.StatusBadGateway, true
	case he.StatusCode == http.StatusGatewayTimeout || (errors.As(err, &ne) && ne.Timeout()):
		return timedOut("The MCP server did not answer in time"), http.StatusGatewayTimeout, true
	case he.StatusCode == http.StatusServiceUnavailable:
		return h.unavailable("The MCP server behind this gateway is unavailable: no healthy upstream"), http.StatusBadGateway, true
	case he.StatusCode == http.StatusBadGateway:
		return h.unavailable("The MCP server behind this gateway is unavailable"), http.StatusBadGateway, true
	}
	return envelope.Envelope{}, 0, false
}

func (h *Handler) unavailable(message string) envelope.Envelope {
	secs := wholeSeconds(time.Duration(h.UpstreamRetryAfter))
	return envelope.New(envelope.HandoffUpstreamUnavailable, message).
		Suggest(fmt.Sprintf("Tell the user the tool server is unavailable, and retry in %s.", plural(secs, "second"))).
		RetryAfter(float64(secs)).
		Envelope()
}

func timedOut(message string) envelope.Envelope {
	return envelope.New(envelope.Timeout, message).
		Suggest("The call may still complete on the server: check its effect before retrying, so that it does not run twice.").
		Envelope()
}
