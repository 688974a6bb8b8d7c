package answer

import (
	"time"

	"github.com/caddymcp/caddy-mcp/internal/sse"
)

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

// Restart readies the tracker for the stream that resumes the one that
// broke, and returns what the client must be sent first: the end of the
// event the break cut off, if part of it reached the client, named so
// that clients drop it (the upstream replays it whole). The new stream is
// read from its start; what the stream owes stays owed.
func (t *Stream) Restart() []byte {
	var out []byte
	if !t.edit || t.passing {
		out = t.AppendUnfinished(nil)
	}
	t.sc.Reset()
	t.data, t.event, t.dataLines, t.over, t.midEvent = t.data[:0], t.event[:0], 0, false, false
	t.raw, t.sent, t.kept, t.out = t.raw[:0], 0, false, t.out[:0]
	t.passing, t.withheld, t.skim, t.cut, t.cutErr, t.probed, t.dropped = false, false, nil, nil, nil, false, false
	t.hasID, t.rewritten = false, nil
	t.resume.buf, t.resume.bufLong = append(t.resume.buf[:0], t.resume.id...), t.resume.long
	return out
}

// WaitToResume waits what the stream's retry field asked for, at most
// maxResumeWait, and reports whether the upstream request is still on.
func (u *Watch) WaitToResume(d time.Duration) bool {
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
