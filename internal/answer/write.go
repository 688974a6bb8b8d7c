package answer

import (
	"io"
	"net/http"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// The answer as the proxy writes it: its header decides its State, and
// each write goes on, or is held, as the state says.

func (u *Watch) WriteHeader(status int) {
	if status >= 200 && u.status == 0 && u.state != Cut {
		u.core.UpstreamStatus(status)
	}
	if u.state == Cut || (u.state == Waiting && u.Deadline.Passed()) {
		// What the proxy says of a request the deadline cancelled (499):
		// the gateway answers for it, with what the hooks make of the
		// header the proxy copied (the upstream's session id sealed).
		u.state = Cut
		if status < 200 || !u.cutHeader {
			u.cutHeader = status >= 200
			u.hooks.header(u.fx, status, u.Header())
		}
		return
	}
	if status < 200 || u.state != Waiting {
		if status < 200 {
			u.hooks.header(u.fx, status, u.Header())
		}
		u.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	u.status = status
	hdr := u.Header()
	u.hooks.header(u.fx, status, hdr)
	if status == http.StatusNotFound && u.Reopen != nil {
		// Perhaps a session the upstream lost: held until the core knows.
		u.Reopen.Lost, u.state = true, Held
		return
	}
	eventStream, readable := IsEventStream(hdr), IdentityEncoded(hdr)
	if (status >= 500 || status == http.StatusTooManyRequests) && !eventStream && readable {
		u.state = Held
		return
	}
	// An event stream is followed, and kept alive, only when its bytes are
	// the events themselves: the gateway cannot read a compressed stream,
	// and anything it wrote into one would corrupt it.
	answer := IsAnswer(status)
	followed := eventStream && readable && answer
	u.follow(followed)
	if u.read != nil && u.holdsBack(hdr, answer, followed, eventStream, readable) {
		u.state = Holding
		return
	}
	if u.hooks.max > 0 && answer && readable && !eventStream {
		// A JSON answer, which hooks that watch read as it passes (those
		// that edit hold it, above).
		u.seen = &seenAnswer{want: declaredLength(hdr["Content-Length"])}
	}
	u.ResponseWriterWrapper.WriteHeader(status)
	if followed {
		u.StartKeepalive()
	}
}

// follow starts following an event stream the answer is (followed), for
// the responses it owes and for the hooks; any other answer has begun the
// request's answer.
func (u *Watch) follow(followed bool) {
	u.state = Passing
	if !followed {
		u.Deadline.answered() // the answer has begun
		u.Answered.Store(true)
		return
	}
	u.sse = newStream(u.fx.Messages, u.fx.Era)
	if u.sse == nil && u.hooks.active() {
		// A stream that owes no response (the standalone GET one, or a
		// resumed one) is read for its notifications, or its replay.
		u.sse = &Stream{era: u.fx.Era}
	}
	if u.sse == nil {
		return
	}
	u.state = Following
	if u.hooks.active() {
		u.sse.hooks, u.sse.fx = &u.hooks, u.fx
	}
}

// holdsBack decides how hooks that edit read the answer (answer: its
// status is one clients read an answer under), and reports whether its
// header is held back meanwhile: a JSON answer is held whole, a followed
// stream event by event; an answer they cannot read is held to be
// replaced, when one fails closed, and otherwise passes unread.
func (u *Watch) holdsBack(hdr http.Header, answer, followed, eventStream, readable bool) bool {
	switch {
	case followed && u.sse != nil:
		u.sse.edit = true
		u.sse.fail = u.core.Unreadable
		u.sse.maxData = u.hooks.maxEvent
		delete(hdr, "Content-Length") // events may be edited
	case answer && !readable && u.hooks.failClosed:
		u.read.failed = errAnswerEncoded
		return true
	case answer && !eventStream:
		u.read.length = hdr["Content-Length"]
		delete(hdr, "Content-Length")
		return true // the header goes with the body, once read
	default:
		u.read = nil // an answer the hooks have no say in
	}
	return false
}

// IsAnswer reports whether a response under status is one clients read as
// the answer to their request: any success but 204, whose answer has no
// body (the Go SDK reads a 201's, 202's or 206's as a 200's, and the
// TypeScript SDK every one but a 202's). Every reader of an answer reads
// one under these the same way, so that no success status lets an answer
// pass unread.
func IsAnswer(status int) bool {
	return status >= 200 && status < 300 && status != http.StatusNoContent
}

func (u *Watch) Write(p []byte) (int, error) {
	if u.state == Waiting {
		u.WriteHeader(http.StatusOK)
	}
	switch u.state {
	case Cut, Replaced:
		return len(p), nil
	case Holding:
		return u.hold(p)
	case Held:
		switch {
		case u.overflow:
			return len(p), nil
		case len(u.heldBody)+len(p) <= MaxHeldBody:
			u.heldBody = append(u.heldBody, p...)
			return len(p), nil
		case !jsonrpc.StartsMessage(u.heldBody, p):
			// An error page, not the upstream speaking JSON-RPC: its start
			// is enough for the excerpt, and the rest is dropped.
			u.heldBody = append(u.heldBody, p[:MaxHeldBody-len(u.heldBody)]...)
			u.overflow = true
			return len(p), nil
		}
		if err := u.Release(); err != nil {
			return 0, err
		}
	case Following:
		return u.WriteEvents(p)
	}
	if u.seen != nil {
		u.seen.write(u, p)
	}
	return u.ToClient(p)
}

// Release sends the error answer held (Held) as the upstream wrote it.
func (u *Watch) Release() error {
	u.state = Passing
	u.ResponseWriterWrapper.WriteHeader(u.status)
	_, err := u.ResponseWriterWrapper.Write(u.heldBody)
	u.heldBody = nil
	return err
}

// WriteEvents follows what the upstream wrote of a followed event stream
// (its own, or one that resumes it), and sends the client what the stream
// lets through.
func (u *Watch) WriteEvents(p []byte) (int, error) {
	out := u.sse.observe(p)
	if u.sse.stop != nil {
		// Stop the proxy's copy: the core answers for what was not read.
		if _, err := u.ToClient(out); err != nil {
			return 0, err
		}
		return 0, u.sse.stop
	}
	if u.sse.resumable {
		u.Resumable.Store(true)
	}
	if u.sse.owed.left == 0 {
		u.Deadline.answered()
		u.Answered.Store(true)
	}
	if u.sse.edit || len(out) != len(p) {
		if _, err := u.ToClient(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return u.ToClient(p)
}

// ReadFrom keeps bytes flowing through Write, where they are watched.
func (u *Watch) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{u}, r)
}

type writerOnly struct{ io.Writer }

// FlushError flushes, except while an answer is held back: flushing then
// would send a 200 header before the core has decided.
func (u *Watch) FlushError() error {
	switch {
	case u.state == Held || u.state == Holding || u.state == Cut:
		return nil
	case u.Drain && u.left():
		return nil
	}
	err := u.ka.flush(http.NewResponseController(u.ResponseWriterWrapper.ResponseWriter).Flush)
	return u.drained(err)
}

// ToClient sends p to the client, in step with the keep-alives.
func (u *Watch) ToClient(p []byte) (int, error) {
	if u.Drain && u.left() {
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
func (u *Watch) left() bool {
	u.gone = u.gone || u.fx.Request.Context().Err() != nil
	return u.gone
}

// drained is the outcome of a write or flush to the client as the proxy
// should see it: when the answer is drained, a failure means the client is
// gone, and the proxy goes on reading the upstream as if nothing failed.
func (u *Watch) drained(err error) error {
	if err != nil && u.Drain {
		u.gone = true
		return nil
	}
	return err
}

// StartKeepalive starts the keep-alives of a stream, when they are on.
func (u *Watch) StartKeepalive() {
	if u.KeepaliveEvery > 0 {
		u.ka = startKeepalive(u.ResponseWriterWrapper.ResponseWriter, u.KeepaliveEvery, u.core.Logger())
	}
}

// StopKeepalive stops them.
func (u *Watch) StopKeepalive() {
	u.ka.stop()
	u.ka = nil
}

// MaxHeldBody bounds the error body held back from the client while the
// core decides whether it is the upstream's own JSON-RPC answer (passed
// through) or an error page (replaced by an envelope). A longer body that
// is JSON-RPC passes through as it is.
const MaxHeldBody = 64 << 10
