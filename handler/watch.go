package handler

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// The response watch: what stands between reverse_proxy and the client for
// one request (see forward.go).

// upstreamWatch stands between reverse_proxy and the client for one request.
// Everything passes through as it is written, and flushes as they happen,
// except a 5xx or 429 answer that does not declare itself an event stream:
// that is held back (at most maxHeldBody) until the handler knows whether the
// upstream spoke JSON-RPC.
type upstreamWatch struct {
	caddyhttp.ResponseWriterWrapper
	h *Handler
	x *exchange
	// hooks are the features' on this answer; seen gathers a JSON answer
	// for hooks that watch it without editing it (nil: none does, or the
	// answer is none they read: an event stream, an error status, nothing).
	hooks answerHooks
	seen  *seenAnswer
	// broke: the upstream broke its answer before its end.
	broke bool
	// status is the final status written, 0 until then.
	status   int
	held     bool
	heldBody []byte
	// overflow: a held error page outgrew maxHeldBody; its rest is dropped.
	overflow bool
	// sse follows an event-stream answer to a POST that holds requests.
	sse *sseTracker
	// keepaliveEvery is how long an event stream may stay idle before a
	// comment line is sent; ka sends them (nil when off or not a stream).
	keepaliveEvery time.Duration
	ka             *keepalive
	// drain: the answer is read to its end even when the client is gone;
	// gone: it is, and what the upstream writes is dropped.
	drain, gone bool
	// reopen, when set, can reopen a session the upstream answers 404
	// for (reopen.go).
	reopen *reopening
	// upstream is the request as it went to the upstream (its context
	// holds the deadline and outlives a client that left), which a
	// resuming GET is sent in (resume.go).
	upstream *http.Request
	// read reads (and may edit) the answer for the hooks that edit (nil:
	// none); deadline is the call's (nil: none), and cut says it passed
	// before the upstream answered, whose request was then cancelled.
	read     *answerRead
	deadline *deadline
	cut      bool
	// cutHeader: the hooks were given the final header of an answer cut
	// at its deadline.
	cutHeader bool
	// Read by the goroutine that acts for a client that left (abandon.go):
	// delivery, what the transport told of the request; answered, the
	// upstream has begun the answer that ends its work (an answer that is
	// not an event stream, or the stream's last owed response); resumable,
	// the answer is a stream the client may resume; cancelled, the
	// upstream was told to stop the request.
	delivery                       delivery
	answered, resumable, cancelled atomic.Bool
}

// ending is how the answer ended, for the hooks; err is what the proxy
// returned.
func (u *upstreamWatch) ending(err error) feature.Ending {
	switch {
	case u.deadline.passed():
		return feature.DeadlinePassed
	case u.x.Request.Context().Err() != nil:
		return feature.ClientGone
	case u.broke || err != nil:
		return feature.Broken
	case u.x.errorCode != "":
		return feature.Replaced
	}
	return feature.Complete
}

// owesAnswer reports whether the client has not had the answer to its
// request yet: nothing was sent, or the stream still owes the response.
func (u *upstreamWatch) owesAnswer() bool {
	return u.nothingSent() || (u.sse != nil && u.sse.owed.left > 0)
}

// nothingSent reports whether nothing of the answer reached the client.
func (u *upstreamWatch) nothingSent() bool {
	return u.status == 0 || u.cut || (u.read != nil && u.read.holding)
}

func (u *upstreamWatch) WriteHeader(status int) {
	if status >= 200 && u.status == 0 && u.x.trace != nil {
		u.x.trace.Upstream(status)
	}
	if u.cut || (u.status == 0 && u.deadline.passed()) {
		// What the proxy says of a request the deadline cancelled (499):
		// the gateway answers for it, with what the hooks make of the
		// header the proxy copied (the upstream's session id sealed).
		u.cut = true
		if status < 200 || !u.cutHeader {
			u.cutHeader = status >= 200
			u.hooks.header(&u.x.Exchange, status, u.Header())
		}
		return
	}
	if status < 200 || u.status != 0 {
		if status < 200 {
			u.hooks.header(&u.x.Exchange, status, u.Header())
		}
		u.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	u.status = status
	hdr := u.Header()
	u.hooks.header(&u.x.Exchange, status, hdr)
	if status == http.StatusNotFound && u.reopen != nil {
		// Perhaps a session the upstream lost: held until the gateway
		// knows (reopen.go).
		u.reopen.lost, u.held = true, true
		return
	}
	eventStream, readable := isEventStream(hdr), identityEncoded(hdr)
	if (status >= 500 || status == http.StatusTooManyRequests) && !eventStream && readable {
		u.held = true
		return
	}
	// An event stream is followed, and kept alive, only when its bytes are
	// the events themselves: the gateway cannot read a compressed stream,
	// and anything it wrote into one would corrupt it.
	answer := isAnswer(status)
	followed := eventStream && readable && answer
	u.follow(followed)
	if u.read != nil && u.holdsBack(hdr, answer, followed, eventStream, readable) {
		return
	}
	if u.hooks.max > 0 && answer && readable && !eventStream {
		// A JSON answer, which hooks that watch read as it passes (those
		// that edit hold it, above).
		u.seen = &seenAnswer{want: declaredLength(hdr["Content-Length"])}
	}
	u.ResponseWriterWrapper.WriteHeader(status)
	if followed && u.keepaliveEvery > 0 {
		u.ka = startKeepalive(u.ResponseWriterWrapper.ResponseWriter, u.keepaliveEvery, u.h.logger)
	}
}

// follow starts following an event stream the answer is (followed), for
// the responses it owes and for the hooks; any other answer has begun the
// request's answer.
func (u *upstreamWatch) follow(followed bool) {
	if !followed {
		u.deadline.answered() // the answer has begun
		u.answered.Store(true)
		return
	}
	u.sse = newSSETracker(u.x.Messages, u.x.Era)
	if u.sse == nil && u.hooks.active() {
		// A stream that owes no response (the standalone GET one, or a
		// resumed one) is read for its notifications, or its replay.
		u.sse = &sseTracker{era: u.x.Era}
	}
	if u.hooks.active() {
		u.sse.hooks, u.sse.fx = &u.hooks, &u.x.Exchange
	}
}

// holdsBack decides how hooks that edit read the answer (answer: its
// status is one clients read an answer under), and reports whether its
// header is held back meanwhile: a JSON answer is held whole, a followed
// stream event by event; an answer they cannot read is held to be
// replaced, when one fails closed, and otherwise passes unread.
func (u *upstreamWatch) holdsBack(hdr http.Header, answer, followed, eventStream, readable bool) bool {
	switch {
	case followed && u.sse != nil:
		u.sse.edit = true
		u.sse.fail = u.unreadable
		u.sse.maxData = u.hooks.maxEvent
		delete(hdr, "Content-Length") // events may be edited
	case answer && !readable && u.hooks.failClosed:
		u.read.failed, u.read.holding = errAnswerEncoded, true
		return true
	case answer && !eventStream:
		u.read.holding, u.read.length = true, hdr["Content-Length"]
		delete(hdr, "Content-Length")
		return true // the header goes with the body, once read
	default:
		u.read = nil // an answer the hooks have no say in
	}
	return false
}

// isAnswer reports whether a response under status is one clients read as
// the answer to their request: any success but 204, whose answer has no
// body (the Go SDK reads a 201's, 202's or 206's as a 200's, and the
// TypeScript SDK every one but a 202's). Every reader of an answer reads
// one under these the same way, so that no success status lets an answer
// pass unread.
func isAnswer(status int) bool {
	return status >= 200 && status < 300 && status != http.StatusNoContent
}

func (u *upstreamWatch) Write(p []byte) (int, error) {
	if u.status == 0 {
		u.WriteHeader(http.StatusOK)
	}
	if u.cut {
		return len(p), nil
	}
	if u.read != nil && u.read.holding {
		return u.hold(p)
	}
	if u.held {
		switch {
		case u.overflow:
			return len(p), nil
		case len(u.heldBody)+len(p) <= maxHeldBody:
			u.heldBody = append(u.heldBody, p...)
			return len(p), nil
		case !jsonrpc.StartsMessage(u.heldBody, p):
			// An error page, not the upstream speaking JSON-RPC: its start
			// is enough for the excerpt, and the rest is dropped.
			u.heldBody = append(u.heldBody, p[:maxHeldBody-len(u.heldBody)]...)
			u.overflow = true
			return len(p), nil
		}
		if err := u.release(); err != nil {
			return 0, err
		}
	}
	if u.sse != nil {
		return u.writeEvents(p)
	}
	if u.seen != nil {
		u.seen.write(u, p)
	}
	return u.toClient(p)
}

// writeEvents follows what the upstream wrote of a followed event stream,
// and sends the client what the tracker lets through.
func (u *upstreamWatch) writeEvents(p []byte) (int, error) {
	out := u.sse.observe(p)
	if u.sse.stop != nil {
		// Stop the proxy's copy: settle answers for what was not read.
		if _, err := u.toClient(out); err != nil {
			return 0, err
		}
		return 0, u.sse.stop
	}
	if u.sse.resumable {
		u.resumable.Store(true)
	}
	if u.sse.owed.left == 0 {
		u.deadline.answered()
		u.answered.Store(true)
	}
	if u.sse.edit || len(out) != len(p) {
		if _, err := u.toClient(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return u.toClient(p)
}

// trailer gives the hooks the header once the proxy has copied the
// upstream's trailers into it, before they are sent.
func (u *upstreamWatch) trailer() {
	if u.status != 0 {
		u.hooks.trailer(&u.x.Exchange, u.Header())
	}
}

// ReadFrom keeps bytes flowing through Write, where they are watched.
func (u *upstreamWatch) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{u}, r)
}

type writerOnly struct{ io.Writer }

// FlushError flushes, except while an answer is held back: flushing then
// would send a 200 header before the handler has decided.
func (u *upstreamWatch) FlushError() error {
	if u.held || u.cut || (u.read != nil && u.read.holding) || (u.drain && u.left()) {
		return nil
	}
	err := u.ka.flush(http.NewResponseController(u.ResponseWriterWrapper.ResponseWriter).Flush)
	return u.drained(err)
}

// toClient sends p to the client, in step with the keepalive.
func (u *upstreamWatch) toClient(p []byte) (int, error) {
	if u.drain && u.left() {
		return len(p), nil
	}
	n, err := u.ka.write(p, u.ResponseWriterWrapper.Write)
	if err = u.drained(err); err == nil {
		n = len(p)
	}
	return n, err
}

// left reports whether the client is gone: its request ended, or a write to
// it failed.
func (u *upstreamWatch) left() bool {
	u.gone = u.gone || u.x.Request.Context().Err() != nil
	return u.gone
}

// drained is the outcome of a write or flush to the client as the proxy
// should see it: when the answer is drained, a failure means the client is
// gone, and the proxy goes on reading the upstream as if nothing failed.
func (u *upstreamWatch) drained(err error) error {
	if err != nil && u.drain {
		u.gone = true
		return nil
	}
	return err
}

func (u *upstreamWatch) stopKeepalive() {
	u.ka.stop()
	u.ka = nil
}

func isEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
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
