package answer

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Reading the upstream's answer to one request for the features' hooks
// (hooks.go). When a hook edits, a JSON answer is held until it is
// complete, then sent at once, edited or not; an event stream is passed
// event by event, each held only until its blank line, so that progress
// reaches the client as it happens (Stream's edit mode). When the
// hooks only watch, a JSON answer is copied as it passes (seenAnswer), and
// an event stream's messages are read as they pass.

// answerRead holds a JSON answer for hooks that edit it.
type answerRead struct {
	// length is the Content-Length it came with.
	length []string
	body   heldBytes
	// failed is why a JSON answer could not be read, when a hook fails
	// closed.
	failed error
	// cut reads the rest of an answer too large to hold, for the hook that
	// answers for it (feature.Cutter).
	cut feature.Cut
}

// seenAnswer copies a JSON answer as it passes to the client, for hooks
// that watch it, and gives it to them once complete: before its last byte
// reaches the client when its length was declared (a client sends its next
// call as soon as it has a tool list), or once the proxy is done.
type seenAnswer struct {
	body heldBytes
	// want is the answer's Content-Length, -1 when it has none.
	want int64
	// over: the answer outgrew what the hooks read; done: it was given to
	// them.
	over, done bool
}

// write follows the bytes of a JSON answer, before they go to the client.
func (s *seenAnswer) write(u *Watch, p []byte) {
	if s.over || s.done {
		return
	}
	if !s.body.add(p, u.hooks.max, s.want) {
		s.over, s.body = true, heldBytes{}
		return
	}
	if s.want >= 0 && int64(s.body.n) >= s.want {
		s.finish(u)
	}
}

// finish gives a complete JSON answer to the hooks.
func (s *seenAnswer) finish(u *Watch) {
	if s.done || s.over {
		return
	}
	s.done = true
	body := s.body.bytes()
	s.body = heldBytes{}
	if len(body) > 0 { // a 202's empty body, say, is no message
		_, _ = u.hooks.message(u.fx, body, true, false)
	}
}

// errAnswerTooLarge stops an answer that outgrew what the gateway holds to
// read it, when it may not be sent unread.
var errAnswerTooLarge error = &feature.TooLargeError{What: "the answer is larger than the gateway reads"}

// errEventTooLarge: an event outgrew what the gateway holds to read it.
var errEventTooLarge error = &feature.TooLargeError{What: fmt.Sprintf("an event is larger than the %d MiB the gateway reads", maxEventData>>20)}

// answerTooLarge stops a JSON answer that outgrew what the hooks read,
// which declared length bytes (-1: none).
func answerTooLarge(length int64) error {
	if length <= 0 {
		return errAnswerTooLarge
	}
	return &feature.TooLargeError{What: "the answer is larger than the gateway reads: the server declared " + strconv.FormatInt(length, 10) + " bytes", Declared: length}
}

// errAnswerEncoded: the answer is compressed, and cannot be read.
var errAnswerEncoded = errors.New("the answer is compressed")

// hold keeps the bytes of a JSON answer until it is complete.
func (u *Watch) hold(p []byte) (int, error) {
	r := u.read
	if r.failed != nil {
		// Stop the proxy's copy: what is owed in its place is answered in
		// settle, now rather than once the upstream ends (a stream may not).
		return 0, r.failed
	}
	if r.cut != nil {
		return r.cutMore(p)
	}
	if r.body.add(p, u.hooks.max, declaredLength(r.length)) {
		return len(p), nil
	}
	if c := u.hooks.cutter(); c != nil {
		// The hook answers for it from its first bytes and what it reads
		// of the rest as it passes: nothing more is held.
		r.cut = c.Cut(u.fx)
		for _, chunk := range r.body.chunks {
			r.cut.Write(chunk)
		}
		r.body = heldBytes{}
		return r.cutMore(p)
	}
	if u.hooks.failClosed {
		// Failing the write stops the proxy's copy: what was held is
		// answered for in settle.
		r.failed, r.body = answerTooLarge(declaredLength(r.length)), heldBytes{}
		return 0, r.failed
	}
	// Too long to edit: it goes as it came, from its first byte.
	u.state = Passing
	if r.length != nil {
		u.Header()["Content-Length"] = r.length
	}
	u.ResponseWriterWrapper.WriteHeader(u.status)
	for _, chunk := range r.body.chunks {
		if _, err := u.ToClient(chunk); err != nil {
			return 0, err
		}
	}
	r.body = heldBytes{}
	return u.ToClient(p)
}

// cutMore gives p to the hook that cuts the answer. Once it reads no
// more, it cannot cut it: the proxy's copy stops, and the answer is
// replaced in settle, as one too large to read.
func (r *answerRead) cutMore(p []byte) (int, error) {
	if r.cut.Write(p) {
		return len(p), nil
	}
	_, r.failed = r.cut.Close()
	r.cut = nil
	if r.failed == nil {
		r.failed = errAnswerTooLarge
	}
	return 0, r.failed
}

// declaredLength is the length a Content-Length header declares, -1 when
// it declares none.
func declaredLength(header []string) int64 {
	if len(header) == 1 {
		if n, err := strconv.ParseInt(header[0], 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// ReleaseRead sends a JSON answer held whole (Holding): as the upstream
// wrote it, edited, or (failClosed, when it cannot be read) replaced.
func (u *Watch) ReleaseRead() error {
	r := u.read
	u.state = Passing
	body := r.body.bytes()
	r.body = heldBytes{}
	if r.cut != nil {
		body, r.failed = r.cut.Close()
		r.cut = nil
	}
	if r.failed == nil && u.hooks.failClosed && strayResponse(u.fx.Messages, body) {
		r.failed = errStrayResponse
	}
	if r.failed == nil && len(body) > 0 {
		out, err := u.hooks.message(u.fx, body, true, true)
		switch {
		case err != nil:
			r.failed = err
		case out != nil:
			body = out
		}
	}
	hdr, status := u.Header(), u.status
	if r.failed != nil {
		// The gateway's own answer, as every one it writes for a request:
		// under 200, which every client reads (one does not read a 202's).
		ClearEntityHeaders(hdr)
		body = u.core.Unreadable(r.failed, u.hooks.id)
		hdr["Content-Type"] = contentTypeJSON
		status = http.StatusOK
	}
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	u.ResponseWriterWrapper.WriteHeader(status)
	_, err := u.ToClient(body)
	return err
}

var contentTypeJSON = []string{"application/json"}

// ClearEntityHeaders removes what the upstream said about the body it
// sent, before another is sent in its place. Other headers (Mcp-Session-Id
// above all) stay.
func ClearEntityHeaders(h http.Header) {
	for _, k := range []string{
		"Content-Type", "Content-Length", "Content-Encoding", "Content-Language",
		"Content-Range", "Content-Disposition", "Content-Location", "Etag",
		"Last-Modified", "Transfer-Encoding", "Retry-After", "Trailer",
	} {
		h.Del(k)
	}
}
