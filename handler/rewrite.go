package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Reading the upstream's answer to one request, and changing what the
// policy changes in it (policy.go). A JSON answer is held until it is
// complete, then sent at once, edited or not; an event stream is passed
// event by event, each held only until its blank line, so that progress
// reaches the client as it happens (sseTracker's edit mode).

// answerRead reads the answer to the one request of an exchange, or, on a
// GET's stream, every message it carries.
type answerRead struct {
	// id is the request's, nil on a GET.
	id json.RawMessage
	// rewrite is given each JSON-RPC message of the answer (a JSON body,
	// or the data of a message event) and returns what to send instead:
	// nil to send the message as it is.
	rewrite func(msg []byte) ([]byte, error)
	// max bounds the bytes of a JSON answer held: a longer one passes as
	// it is, unread, unless failClosed. (An event stream is held an event
	// at a time, each within maxEventData.)
	max int
	// failClosed: a message that cannot be read is not sent; fail is the
	// message sent in its place, for the id given (a tools/list whose
	// hidden tools could otherwise leak).
	failClosed bool
	fail       func(err error, id json.RawMessage) []byte
	// call: the request is a tools/call, whose outcome is counted: ""
	// until its response is read.
	call    bool
	outcome string

	// holding: a JSON answer is being held; length is the Content-Length
	// it came with.
	holding bool
	length  []string
	body    heldBytes
	// failed is why a JSON answer could not be read, when failClosed.
	failed error
}

// errAnswerTooLarge stops an answer that outgrew what the gateway holds to
// read it, when it may not be sent unread.
var errAnswerTooLarge = errors.New("the answer is larger than the gateway reads")

// errEventTooLarge: an event outgrew what the gateway holds to read it.
var errEventTooLarge = fmt.Errorf("an event is larger than the %d MiB the gateway reads", maxEventData>>20)

// errAnswerEncoded: the answer is compressed, and cannot be read.
var errAnswerEncoded = errors.New("the answer is compressed")

// errAnswerStatus: the answer is an event stream under a success status
// other than 200, which the gateway does not follow.
var errAnswerStatus = errors.New("the answer is an event stream under a status other than 200")

// hold keeps the bytes of a JSON answer until it is complete.
func (u *upstreamWatch) hold(p []byte) (int, error) {
	r := u.read
	if r.failed != nil {
		// Stop the proxy's copy: what is owed in its place is answered in
		// settle, now rather than once the upstream ends (a stream may not).
		return 0, r.failed
	}
	if r.body.add(p, r.max, declaredLength(r.length)) {
		return len(p), nil
	}
	if r.failClosed {
		// Failing the write stops the proxy's copy: what was held is
		// answered for in settle.
		r.failed, r.body = errAnswerTooLarge, heldBytes{}
		return 0, r.failed
	}
	// Too long to edit: it goes as it came, from its first byte.
	r.holding = false
	if r.length != nil {
		u.Header()["Content-Length"] = r.length
	}
	u.ResponseWriterWrapper.WriteHeader(u.status)
	for _, chunk := range r.body.chunks {
		if _, err := u.toClient(chunk); err != nil {
			return 0, err
		}
	}
	r.body = heldBytes{}
	return u.toClient(p)
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

// releaseRead sends a JSON answer held whole: as the upstream wrote it,
// edited, or (failClosed, when it cannot be read) replaced.
func (h *Handler) releaseRead(u *upstreamWatch) error {
	r := u.read
	r.holding = false
	body := r.body.bytes()
	r.body = heldBytes{}
	if r.failed == nil {
		out, err := r.rewrite(body)
		switch {
		case err != nil && r.failClosed:
			r.failed = err
		case out != nil:
			body = out
		}
	}
	hdr := u.Header()
	if r.failed != nil {
		clearEntityHeaders(hdr)
		body = r.fail(r.failed, r.id)
		hdr["Content-Type"] = contentTypeJSON
	}
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	u.ResponseWriterWrapper.WriteHeader(u.status)
	_, err := u.toClient(body)
	return err
}
