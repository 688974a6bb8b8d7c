package answer

import (
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// Resuming a broken stream. An upstream whose events carry ids (the
// TypeScript SDK's servers with an event store, the Go SDK's with one) can
// replay a stream after any of them: a GET with Last-Event-ID. When such
// a stream to a POST breaks while it still owes responses, the gateway
// resumes it itself, on the same upstream (the request's session and pin),
// and splices what the upstream replays into the client's stream: the
// client sees one stream, whose events pass as the upstream wrote them.
// When the upstream cannot resume it (the connection refused: the server
// died; 404: it restarted and lost the session; any other answer but an
// event stream), the core ends the client's stream with the envelope for
// each response still owed, which says the call may have run. The client
// is never left to resume a stream only to meet a server that is gone,
// with an answer it cannot match to its call.
//
// A stream the upstream ended whole, without a response, is its own to
// close (a server may close one and ask the client to come back with
// Last-Event-ID): it is left to the client, as it always was.
//
// The watch decides when to resume and reads what each GET answers; the
// core sends the GET, through the rest of its route.

// maxResumes bounds the GETs the gateway sends to resume one answer: a
// server that breaks every stream it resumes costs that many, and then
// the envelope.
const maxResumes = 3

// errNotResumed refuses the body of an answer to a resuming GET that is
// no event stream.
var errNotResumed = errors.New("caddy-mcp: the upstream's answer resumes no stream")

// maxResumeWait bounds how long a stream's retry field makes the gateway
// wait before it resumes: the client waits meanwhile.
const maxResumeWait = 2 * time.Second

// MaxResumeID bounds the event id the gateway keeps to resume a stream; a
// stream whose last id is longer is not resumed, and the responses it
// owes get the envelope.
const MaxResumeID = 1 << 10

// resumePoint is where a followed stream would resume: its last event id,
// as the SSE specification keeps it (the id field sets a buffer, and each
// event's dispatch makes the buffer the stream's last id), and the wait
// its retry field asks for.
type resumePoint struct {
	buf     []byte
	bufLong bool
	id      []byte
	long    bool
	retry   time.Duration
}

// idField reads an id field's value.
func (r *resumePoint) idField(value []byte) {
	if sse.IgnoredID(value) {
		return // ignored, as clients ignore it
	}
	r.bufLong = len(value) > MaxResumeID
	if !r.bufLong {
		r.buf = append(r.buf[:0], value...)
	}
}

// idTooLong reads an id field too long to keep.
func (r *resumePoint) idTooLong() { r.bufLong = true }

// retryField reads a retry field: milliseconds, in ASCII digits only.
func (r *resumePoint) retryField(value []byte) {
	if ms, ok := sse.Retry(value); ok {
		r.retry = min(time.Duration(ms)*time.Millisecond, maxResumeWait)
	}
}

// dispatched is an event's end: its id, if the stream set one, is the
// stream's last.
func (r *resumePoint) dispatched() {
	r.long = r.bufLong
	r.id = append(r.id[:0], r.buf...)
}

// lastID is the Last-Event-ID to resume the stream with, false when there
// is none the gateway can send.
func (r *resumePoint) lastID() (string, bool) {
	if r.long || len(r.id) == 0 {
		return "", false
	}
	return string(r.id), true
}

// restart readies the tracker for the stream that resumes the one that
// broke, and returns what the client must be sent first: the end of the
// event the break cut off, if part of it reached the client, named so
// that clients drop it (the upstream replays it whole). The new stream is
// read from its start; what the stream owes stays owed.
func (t *Stream) restart() []byte {
	var out []byte
	if !t.edit || t.fate == eventPassing {
		out = t.AppendUnfinished(nil)
	}
	t.sc.Reset()
	t.data, t.event, t.dataLines, t.over, t.midEvent = t.data[:0], t.event[:0], 0, false, false
	t.raw, t.sent, t.kept, t.out = t.raw[:0], 0, false, t.out[:0]
	t.fate, t.skim, t.cut, t.cutErr, t.probed, t.dropped = eventHeld, nil, nil, nil, false, false
	t.hasID, t.rewritten = false, nil
	t.resume.buf, t.resume.bufLong = append(t.resume.buf[:0], t.resume.id...), t.resume.long
	return out
}

// waitToResume waits what the stream's retry field asked for, at most
// maxResumeWait, and reports whether the upstream request is still on.
func (u *Watch) waitToResume(d time.Duration) bool {
	ctx := u.Upstream.Context()
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Resume resumes the stream the upstream broke, while it owes responses,
// on up to maxResumes GETs, and reports whether the resumed stream ended
// whole: the client has then had what it replayed, and what it still
// owes, if anything, is settled as for any stream its upstream ended.
// Otherwise the stream is no longer resumable, and the core ends it with
// the envelope for each response it still owes.
//
// send sends the GET that resumes the stream after lastID through the
// rest of the route, its answer written to w, and returns what the route
// returned; a panic of the route goes on, but reverse_proxy's
// http.ErrAbortHandler: the upstream broke the resumed stream too.
// answered is told of each GET's answer: streamed, it resumed the stream
// (an event stream); otherwise it was refused (any other answer).
func (u *Watch) Resume(send func(lastID string, w http.ResponseWriter) error, answered func(streamed bool)) bool {
	t := u.sse
	if t == nil || !t.resumable || t.owed.left == 0 || t.stop != nil {
		return false
	}
	if u.resumeAgain(send, answered) {
		return true
	}
	t.resumable = false
	return false
}

// resumeAgain sends the GETs of Resume, one after the other while each
// resumed stream breaks again.
func (u *Watch) resumeAgain(send func(string, http.ResponseWriter) error, answered func(bool)) bool {
	t := u.sse
	for range maxResumes {
		id, retry, ok := t.resumeAt()
		if !ok || u.fx.Request.Context().Err() != nil || u.Deadline.Passed() || !u.waitToResume(retry) {
			return false
		}
		if _, err := u.ToClient(t.restart()); err != nil {
			return false
		}
		streamed, broke := u.resumeOnce(send, answered, id)
		switch {
		case !streamed || t.stop != nil:
			return false
		case !broke || t.owed.left == 0:
			// Ended whole, or broken after its last response: the client
			// has its answers, or the stream is the upstream's to end.
			return true
		}
	}
	return false
}

// resumeOnce sends the GET that resumes the stream after id, and passes
// what it answers into the client's stream when it is an event stream.
// streamed reports that it was, broke that the upstream broke it again.
func (u *Watch) resumeOnce(send func(string, http.ResponseWriter) error, answered func(bool), id string) (streamed, broke bool) {
	w := &resumeWriter{u: u, answered: answered, header: make(http.Header)}
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			streamed, broke = w.streamed, true
		}
	}()
	u.StartKeepalive()
	defer u.StopKeepalive()
	err := send(id, w)
	if w.status == 0 {
		answered(false)
	}
	if !w.streamed {
		u.core.Logger().Debug("the upstream did not resume a broken stream", zap.String("last_event_id", id), zap.Int("status", w.status), zap.Error(err))
	}
	return w.streamed, err != nil
}

// resumeWriter takes the upstream's answer to a resuming GET: an event
// stream passes into the client's, as the stream it resumes; anything else
// is refused at its first byte, which stops the proxy reading it.
type resumeWriter struct {
	u        *Watch
	answered func(streamed bool)
	header   http.Header
	status   int
	streamed bool
}

func (w *resumeWriter) Header() http.Header { return w.header }

func (w *resumeWriter) WriteHeader(status int) {
	if w.status != 0 || status < 200 {
		return
	}
	w.status = status
	w.streamed = status == http.StatusOK && IsEventStream(w.header) && IdentityEncoded(w.header)
	w.answered(w.streamed)
}

func (w *resumeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.streamed {
		// Not read on: an answer that is no stream may never end.
		return 0, errNotResumed
	}
	return w.u.WriteEvents(p)
}

// FlushError flushes the client's stream, as the proxy does after each
// event.
func (w *resumeWriter) FlushError() error {
	if !w.streamed {
		return nil
	}
	return w.u.FlushError()
}
