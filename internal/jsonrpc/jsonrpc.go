// Package jsonrpc reads JSON-RPC 2.0 messages, and batches of them, from a
// body without decoding what it does not need: it validates the whole body
// as JSON (json.Valid's grammar, plus the NaN and Infinity tokens and the
// leading byte order mark that lenient servers take), learns each message's
// kind, method, id, and the params.name, params.uri and params.taskId it
// may name, and where its params and params._meta lie, and skips
// everything else, arguments and results above all, a word at a time. It
// refuses what different servers could read differently: a member given
// twice or in another letter case.
//
// It knows nothing of HTTP or MCP beyond those members of params, which
// MCP uses for the tool or prompt, the resource and the task a request
// names, and for the trace context it carries (SEP-414).
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Kind is what a JSON-RPC message is.
type Kind uint8

const (
	// Invalid: valid JSON that is not a JSON-RPC message: a value that is
	// not an object, or an object whose method is not a string, or without
	// a method and a result or error with an id.
	Invalid Kind = iota
	Request
	Notification
	// Response: a client's answer to a server-to-client request.
	Response
)

// Message is what is learned of one JSON-RPC message. Its byte slices point
// into the body, which is never modified, or hold a decoded copy.
type Message struct {
	Kind Kind
	// Method is the method, unescaped.
	Method []byte
	// ID is the id exactly as sent (a JSON string, number or null); nil when
	// the message has none.
	ID json.RawMessage
	// Name is params.name, unescaped; nil when absent or not a string.
	Name []byte
	// URI is params.uri and TaskID params.taskId, unescaped; nil when
	// absent or not a string.
	URI, TaskID []byte
	// carrier is where params and params._meta lie in the body, packed
	// (Carrier reads it).
	carrier packedCarrier
}

// ErrAmbiguous marks a message that different JSON-RPC servers could read
// differently: a member of ours given twice, or given again under another
// letter case (which case-insensitive decoders such as Go's encoding/json
// would accept). A proxy cannot be sure which method the server behind it
// will run, and should refuse the message instead of guessing.
var ErrAmbiguous = errors.New("ambiguous message")

// SyntaxError is a body that is not JSON.
type SyntaxError struct {
	Offset int
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.msg)
}

// MaxDepth bounds the nesting of arrays and objects, so that a hostile body
// cannot make the scanner recurse without limit.
const MaxDepth = 1000

// ErrTooManyMessages is a batch holding more messages than the caller takes.
var ErrTooManyMessages = errors.New("too many messages in the batch")

// Parse reads a JSON-RPC message or batch from body and appends what
// it learns to msgs, at most max messages: a batch holding more is refused
// with ErrTooManyMessages as soon as its message max+1 begins, before any
// state is kept for it. The rest of it is then left unread. batch reports
// whether body is an array. Errors are those of Each.
func Parse(body []byte, msgs []Message, max int) (_ []Message, batch bool, err error) {
	batch, err = Each(body, func(m Message) error {
		if len(msgs) >= max {
			return ErrTooManyMessages
		}
		msgs = append(msgs, m)
		return nil
	})
	return msgs, batch, err
}

// Each reads a JSON-RPC message or batch from body and calls visit
// with what it learns of each message, in order. (visit takes the message by
// value: a pointer given to a func value would escape, and cost an
// allocation per body.) The whole body is validated as JSON (see scanner);
// arguments and results are skipped, never decoded. An error from visit ends
// the scan and is returned. batch reports whether body is an array.
//
// A body that is not JSON is a *SyntaxError even when it is also ambiguous:
// ErrAmbiguous is reported only for valid JSON.
func Each(body []byte, visit func(Message) error) (batch bool, err error) {
	s := scanner{b: body}
	return s.each(visit)
}

func (s *scanner) each(visit func(Message) error) (batch bool, err error) {
	s.need(len(byteOrderMark))
	if bytes.HasPrefix(s.b, byteOrderMark) {
		// Servers that decode the body as text first (the TypeScript SDK's,
		// Python's json) drop a leading byte order mark.
		s.i = len(byteOrderMark)
	}
	s.ws()
	switch s.peek() {
	case '[':
		batch = true
		s.open = true
		err = s.batch(visit)
	case '{':
		var m Message
		s.open = true
		if err = s.message(&m, 1); err == nil {
			err = visit(m)
		}
	default:
		if err = s.value(0); err == nil {
			err = visit(Message{})
		}
	}
	s.open = false
	if err != nil {
		return batch, err
	}
	s.ws()
	for s.i == len(s.b) && s.more() {
		s.ws() // to the end of a body still arriving
	}
	if s.i != len(s.b) {
		return batch, s.errorf("unexpected data after the message")
	}
	if s.ambiguous {
		return batch, ErrAmbiguous
	}
	return batch, nil
}

// Source is a body arriving while it is read (see ParseStream).
type Source interface {
	// More is called when the scan needs more bytes than it was given. It
	// returns the body as received so far, which must begin with every
	// byte given before and be longer, or ok false when the body has no
	// more. read is how many bytes the scan has read; open reports
	// whether they all lie inside the body's top-level value, which has
	// not ended: bytes a reader of the body cannot yet act on.
	More(read int, open bool) (body []byte, ok bool)
}

// ParseStream is Parse over a body that arrives while it is read: src gives
// the bytes as they come, and head, when not nil, is shown what is learned
// of a body holding a single message each time a member of its params is
// read (name, uri, taskId), until it returns true: a caller may act on the
// message's head while its arguments still arrive. Whatever head was shown,
// the whole body is validated as Parse validates it, and the result is
// Parse's on the whole body.
func ParseStream(src Source, msgs []Message, max int, head func(Message) bool) (_ []Message, batch bool, err error) {
	s := scanner{src: src, head: head}
	batch, err = s.each(func(m Message) error {
		if len(msgs) >= max {
			return ErrTooManyMessages
		}
		msgs = append(msgs, m)
		return nil
	})
	return msgs, batch, err
}
