// Package answer reads an upstream's answer to one request, once, as
// reverse_proxy writes it: the Watch that stands between the proxy and the
// client, whose State says where the answer stands; the features' hooks on
// it; the event stream it follows (Stream: the responses a POST is still
// owed, what the hooks read and replace, its repair and its resumption);
// and what acts for the request while its answer is on its way (its
// Deadline, keep-alives, a client that left). It decides nothing about
// what the client is owed once the proxy is done: the core reads where the
// answer stands, and settles.
package answer

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Watch stands between reverse_proxy and the client for one request: the
// answer reader. It reads the upstream's answer as the proxy writes it,
// once, for the core and the features' hooks, and passes it on as it is
// written, flushing as the proxy does, except what the core must decide
// on first (State says which).
//
// The core starts it (Start) before the request goes upstream, hands it to
// the proxy as the response writer, and, once the proxy is done, reads
// where the answer stands (State, Stream) to settle what the client is
// still owed.
type Watch struct {
	caddyhttp.ResponseWriterWrapper
	// core is the request's side of the core; fx its exchange.
	core Core
	fx   *feature.Exchange
	// state is where the answer stands; status is the final status the
	// upstream wrote, 0 until then.
	state  State
	status int
	// hooks are the features' on this answer; seen gathers a JSON answer
	// for hooks that watch it without editing it (nil: none does, or the
	// answer is none they read: an event stream, an error status, nothing).
	hooks Hooks
	seen  *seenAnswer
	// heldBody is the error answer held (Held); overflow: it outgrew
	// maxHeldBody, and its rest is dropped.
	heldBody []byte
	overflow bool
	// sse follows an event stream (Following).
	sse *Stream
	// read holds a JSON answer for the hooks that edit it (Holding; nil
	// when none edits); cutHeader: the hooks were given the final header
	// of an answer cut at its deadline (Cut).
	read      *answerRead
	cutHeader bool
	// KeepaliveEvery is how long an event stream may stay idle before a
	// comment line is sent; ka sends them (nil when off or not a stream).
	KeepaliveEvery time.Duration
	ka             *keepalive
	// Drain: the answer is read to its end even when the client is gone;
	// gone: it is, and what the upstream writes is dropped.
	Drain, gone bool
	// Broke: the upstream broke its answer before its end.
	Broke bool
	// Reopen, when set, can reopen a session the upstream answers 404
	// for.
	Reopen *Reopening
	// Upstream is the request as it went to the upstream (its context
	// holds the deadline and outlives a client that left), which a
	// resuming GET is sent in.
	Upstream *http.Request
	// Deadline is the call's (nil: none).
	Deadline *Deadline
	// Read by the goroutine that acts for a client that left: Delivery,
	// what the transport told of the request; Answered, the upstream has
	// begun the answer that ends its work (an answer that is not an event
	// stream, or the stream's last owed response); Resumable, the answer
	// is a stream the client may resume; Cancelled, the upstream was told
	// to stop the request.
	Delivery                       Delivery
	Answered, Resumable, Cancelled atomic.Bool
}

// State is where an answer stands, as the watch passes it on. An answer
// begins Waiting, and the upstream's final header decides what it is:
//
//	Waiting ──┬─> Held ──────> Passing   (JSON-RPC after all: Release)
//	          │          └───> Replaced  (an error page, or a session lost)
//	          ├─> Holding ───> Passing   (too long to edit, or ReleaseRead)
//	          ├─> Following
//	          ├─> Passing
//	          └─> Cut                    (its deadline passed first)
//
// Held and Holding send nothing until the core decides; Cut and Replaced
// send nothing of what the proxy still writes.
type State uint8

const (
	// Waiting: the upstream has written no final header yet.
	Waiting State = iota
	// Held: an error answer that is no event stream (a 5xx, a 429, or a
	// 404 of a session that may be reopened) is held back, at most
	// MaxHeldBody of it, until the core knows whether the upstream spoke
	// JSON-RPC.
	Held
	// Holding: a JSON answer is held whole for the hooks that edit it, or
	// to be replaced when they cannot read it.
	Holding
	// Following: an event stream passes as it is written, followed for
	// the responses it owes and, for the hooks, event by event (Stream).
	Following
	// Passing: the answer passes as it is written, read only by the hooks
	// that watch a JSON answer.
	Passing
	// Cut: the call's deadline passed before its answer began; what the
	// proxy writes is dropped, and the core answers in its place.
	Cut
	// Replaced: the core answered in the upstream's place.
	Replaced
)

// Core is what the watch asks of the core for one request.
type Core interface {
	// Unreadable is the message sent in place of what the hooks could not
	// read, for id (the request's, or an event's), recorded as the
	// request's answer.
	Unreadable(err error, id json.RawMessage) []byte
	// UpstreamStatus is told the final status the upstream answered with.
	UpstreamStatus(status int)
	// Logger logs what the watch's own goroutines recover.
	Logger() *zap.Logger
}

// Start readies the watch for the answer to the request of fx, written to
// w, and opens the hooks on it: the responders', those of the admitters'
// state that is a Responder, then trace's (which sees what the client is
// sent; nil: none). It reports whether any hook was opened. While a hook
// edits, the request asks for no compressed answer.
func (u *Watch) Start(w http.ResponseWriter, fx *feature.Exchange, core Core, responders []feature.Responder, undos []feature.Undo, trace feature.Hook) bool {
	*u = Watch{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, core: core, fx: fx}
	if (len(responders) == 0 && !slices.ContainsFunc(undos, responds) && trace == nil) || !u.hooks.open(responders, undos, fx, trace) {
		return false
	}
	if u.hooks.edit {
		u.read = &answerRead{}
		delete(fx.Request.Header, "Accept-Encoding")
	}
	return true
}

// State is where the answer stands.
func (u *Watch) State() State { return u.state }

// Status is the final status the upstream wrote, 0 until it wrote one.
func (u *Watch) Status() int { return u.status }

// Stream is the event stream the answer is, as followed (nil: it is none,
// or one that owes nothing and no hook reads).
func (u *Watch) Stream() *Stream { return u.sse }

// Hooks are the hooks opened on the answer.
func (u *Watch) Hooks() *Hooks { return &u.hooks }

// Gone reports whether the client was found gone while the answer drained.
func (u *Watch) Gone() bool { return u.gone }

// HeldBody is the error answer held (Held).
func (u *Watch) HeldBody() []byte { return u.heldBody }

// Failed is why the JSON answer held for the hooks could not be read (nil:
// it could, or none is held).
func (u *Watch) Failed() error {
	if u.read == nil {
		return nil
	}
	return u.read.failed
}

// Replace lets go of what is held: the core answers in the upstream's
// place.
func (u *Watch) Replace() {
	u.state, u.heldBody = Replaced, nil
	if u.read != nil {
		u.read.body, u.read.cut = heldBytes{}, nil
	}
}

// Rewait readies the watch for a second answer to the request, sent again
// after the first was held (Held): a lost session's 404.
func (u *Watch) Rewait() {
	u.state, u.status, u.heldBody, u.overflow = Waiting, 0, nil, false
}

// Ending is how the answer ended, for the hooks; err is what the proxy
// returned, replaced whether the core answered in the upstream's place.
func (u *Watch) Ending(err error, replaced bool) feature.Ending {
	switch {
	case u.Deadline.Passed():
		return feature.DeadlinePassed
	case u.fx.Request.Context().Err() != nil:
		return feature.ClientGone
	case u.Broke || err != nil:
		return feature.Broken
	case replaced:
		return feature.Replaced
	}
	return feature.Complete
}

// Finish ends the watch once the proxy is done: the keep-alives stop, the
// hooks are given the trailers, and a JSON answer they watch, if they
// were not given it yet.
func (u *Watch) Finish() {
	u.StopKeepalive()
	if u.status != 0 {
		u.hooks.trailer(u.fx, u.Header())
	}
	if u.seen != nil {
		u.seen.finish(u)
	}
}

// OwesAnswer reports whether the client has not had the answer to its
// request yet: nothing was sent, or the stream still owes the response.
func (u *Watch) OwesAnswer() bool {
	return u.NothingSent() || (u.sse != nil && u.sse.owed.left > 0)
}

// NothingSent reports whether nothing of the answer reached the client.
func (u *Watch) NothingSent() bool {
	return u.state == Waiting || u.state == Cut || u.state == Holding
}

// Reopening is what the watch keeps of an answer that may be a lost
// session's 404: the hook that reopens, the client's initialize params,
// and the response header as it was before the upstream wrote to it (a
// second answer is copied into it).
type Reopening struct {
	Hook   feature.Reopener
	Params []byte
	Header http.Header
	// Lost: the upstream answered 404, held back.
	Lost bool
}
