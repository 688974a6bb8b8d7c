package answer

import (
	"encoding/json"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// maxEventData bounds what the tracker keeps of one SSE event to learn
// whether it carries a response, and of one line, unless the hooks read
// more (Hooks.max). An event beyond it is not read; since it might
// have been the response, a stream that carried one is never repaired.
const maxEventData = 1 << 20

// Stream follows an upstream's event-stream answer to a POST, as it is
// written through, to know which requests still await their response and
// whether the client could resume the stream. It never delays, buffers for
// the client, or changes an event, except in edit mode (edit set): each
// event is then held until its blank line, and the response the request
// is owed may be sent rewritten. An event too large to hold is, in edit
// mode, passed unread as it comes, or, when the read fails closed, not sent
// at all: an error takes its place, for its id (see outgrown).
type Stream struct {
	owed owedResponses
	// era is the request's: whether event ids make a stream resumable, and
	// which error code carries an envelope.
	era feature.Era
	// resumable: an event carried an id in an era where the client can
	// reconnect with Last-Event-ID and the server can replay; the gateway
	// must not answer in its place.
	resumable bool
	// unreadable: an event was too large to read.
	unreadable bool
	// sc reads the stream's lines; longField is what the line too long
	// to hold being received is.
	sc        sse.Scanner
	longField longField
	// data and event are the fields of the event being received; over
	// says its data outgrew maxEventData, and is not kept.
	data      []byte
	event     []byte
	dataLines int
	over      bool
	// midEvent: field lines were received since the last dispatch.
	midEvent bool
	// hooks, when set, are given the data of each message event, read in
	// the exchange fx.
	hooks *Hooks
	fx    *feature.Exchange

	// Edit mode (a hook edits). raw holds the bytes received since the
	// last write that are not sent yet, from sent on, the write being read
	// from base on; kept says the bytes
	// let go of last were sent as they came, not dropped or replaced (the
	// LF of a CRLF cut across writes goes as they did); lineEnd ends the
	// line being handled; out gathers what a write sends; id is the
	// event's id field, and rewritten the data to send in place of the
	// event's; fail is the message sent in place of an event the hooks
	// could not read, for an id.
	edit      bool
	fail      func(err error, id json.RawMessage) []byte
	raw       []byte
	base      int
	sent      int
	kept      bool
	lineEnd   int
	out       []byte
	id        []byte
	hasID     bool
	rewritten []byte
	// fate is what becomes of the bytes of the event being received, in
	// edit mode (eventHeld, unless it outgrew what is held of it); skim
	// reads the data of one withheld meanwhile, when that outgrew
	// maxEventData too, to answer for it at its end.
	fate eventFate
	skim *jsonrpc.Skimmer
	// dropped: the event just read is not sent, nor anything in its place
	// (a response to no request of the POST, under a hook that fails
	// closed; a message that owes nothing a hook refused).
	dropped bool
	// probed: the event being received outgrew the bound of the hook that
	// fails closed on the response owed, and was found not to be it;
	// cutErr is why the cut reading it gave up; stop is why the gateway
	// stopped reading the stream (overrun.go).
	probed       bool
	cutErr, stop error
	// loneCR: a line ended with a CR alone, which the Go SDK's client does
	// not take for a line's end (the SSE specification and the TypeScript
	// client do).
	loneCR bool
	// cut reads a withheld event's data for the hook that answers for it
	// (feature.Cutter); maxData is what is held of an event's data, when
	// the hooks read more than maxEventData of a message.
	cut     feature.Cut
	maxData int
	// resume is where the gateway would resume the stream (resume.go).
	resume resumePoint
}

// eventFate is what becomes of the bytes of an event in edit mode.
type eventFate uint8

const (
	// eventHeld: held until the event's end, then sent as it came,
	// rewritten, or in the form the client may have.
	eventHeld eventFate = iota
	// eventPassing: it outgrew what is held of it, and goes to the client
	// unread, as it comes.
	eventPassing
	// eventWithheld: it outgrew what is held of it under a hook that
	// fails closed, or was dropped: its bytes go nowhere, and what the
	// client is owed for it is answered at its end.
	eventWithheld
)

// longField is what a line too long to keep is.
type longField uint8

const (
	longOther longField = iota // a comment, an event type, or a field clients ignore
	longData
	longID
)

// newStream returns a tracker for the answer to msgs, sent in era e, or
// nil when msgs hold no request, which no answer can owe anything.
func newStream(msgs []jsonrpc.Message, e feature.Era) *Stream {
	t := &Stream{era: e}
	if !t.owed.init(msgs) {
		return nil
	}
	return t
}

// Repairable reports whether the stream owes responses that only the gateway
// can still give.
func (t *Stream) Repairable() bool {
	return t.owed.left > 0 && !t.resumable && !t.unreadable
}

// observe follows the bytes the upstream wrote, and returns those to send
// now: p itself, except in edit mode.
func (t *Stream) observe(p []byte) []byte {
	if !t.edit {
		t.scan(p, 0)
		return p
	}
	base := len(t.raw)
	t.raw = append(t.raw, p...)
	t.out = t.out[:0]
	t.scan(p, base)
	if len(t.raw)-t.sent > 2*t.limit() {
		// Lines that are no data (comments, other fields) add up too.
		t.outgrown()
	}
	t.checkBound()
	t.checkLines()
	switch t.fate {
	case eventWithheld:
		t.sent, t.kept = len(t.raw), false
	case eventPassing:
		t.out = append(t.out, t.raw[t.sent:]...)
		t.sent, t.kept = len(t.raw), true
	}
	if t.sent > 0 {
		// Only what was let go of is dropped: an event held whole is not
		// copied onto itself at every write, which made holding it cost
		// the square of its size in writes of a few bytes.
		t.raw = append(t.raw[:0], t.raw[t.sent:]...)
	}
	if len(t.raw) == 0 {
		t.raw = shrink(t.raw)
	}
	t.sent = 0
	return t.out
}

// outgrown handles an event that outgrew what the tracker holds of it. It
// is not read: it passes unread (in edit mode, as it comes), or, when the
// read fails closed, it is withheld: what the client must not get unread,
// it does not get at all. Only an event that passes makes the stream
// unreadable: a withheld one cannot have given the client its response.
func (t *Stream) outgrown() {
	switch {
	case t.fate == eventWithheld:
	case t.edit && t.hooks.failClosed:
		t.fate = eventWithheld
	default:
		t.unreadable = true
		if t.edit {
			t.fate = eventPassing
		}
	}
}

// scan reads the lines of p, whose first byte is raw's byte base in edit
// mode.
func (t *Stream) scan(p []byte, base int) {
	if len(p) == 0 {
		return // the CR of a CRLF may still be waiting for its LF
	}
	t.owed.confirm()
	t.base, t.sc.Max = base, t.limit()
	t.sc.Write(p, t)
	if t.sc.LoneCR() {
		t.loneCR = true
	}
}

// shrink empties a buffer of the tracker, and lets it go when a large
// event grew it: a stream may live for hours after one.
func shrink(b []byte) []byte {
	if cap(b) > 64<<10 {
		return nil
	}
	return b[:0]
}

// send moves the held bytes up to the end of the current line to out, or
// drops them when the event they are part of is withheld.
func (t *Stream) send() { t.release(t.fate != eventWithheld) }

// release lets go of the held bytes up to the end of the current line: to
// out when keep, or nowhere.
func (t *Stream) release(keep bool) {
	if keep {
		t.out = append(t.out, t.raw[t.sent:t.lineEnd]...)
	}
	t.sent, t.kept = t.lineEnd, keep
}

// Follow reads what the scanner read of the stream, as the SSE
// specification reads it.
func (t *Stream) Follow(e sse.Event) {
	switch e.Kind {
	case sse.JoinedLF:
		if t.edit && t.sent == t.base {
			// The line its CR ended is gone already: the LF goes as it did.
			t.lineEnd = t.base + e.End
			t.release(t.kept)
		}
	case sse.Blank:
		t.lineEnd = t.base + e.End
		t.owed.tentative = e.Tentative
		t.dispatch()
		t.owed.tentative = false
	case sse.Comment:
		// A comment, such as a keep-alive.
		t.lineEnd = t.base + e.End
		if t.edit && !t.midEvent {
			t.endComment()
		}
	case sse.Field:
		t.lineEnd = t.base + e.End
		t.field(e.Name, e.Value)
	case sse.LongComment:
		// Between events, it is no message, and passes.
		t.longField = longOther
		if t.edit && !t.midEvent && t.fate != eventWithheld {
			t.fate = eventPassing
		}
		t.unreadable = t.unreadable || t.fate != eventWithheld
	case sse.LongField:
		t.startLong(e.Name)
	case sse.Piece:
		if t.longField == longData && t.skim != nil {
			t.skimWrite(e.Value)
		}
	case sse.LongEnd:
		t.lineEnd = t.base + e.End
		t.endLong()
	}
}

// startLong begins a field line too long to keep, named name: it is let
// go, and a data line's value goes to the skimmer, if the event has one,
// as it comes.
func (t *Stream) startLong(name []byte) {
	t.longField = longOther
	t.midEvent = true
	switch string(name) {
	case "data":
		t.longField = longData
		if !t.over {
			t.dataOutgrown()
		}
		t.skimBreak()
	case "event":
		// A type that long is none clients read.
		t.event = append(t.event[:0], discardedEvent...)
	case "id":
		// Not kept: an event sent in place of this one carries no id.
		t.longField = longID
		t.hasID = false
		t.resume.idTooLong()
	}
	t.unreadable = t.unreadable || t.fate != eventWithheld
}

// endLong ends a line too long to keep.
func (t *Stream) endLong() {
	if t.longField == longData {
		t.dataLines++
	}
	if t.edit && !t.midEvent {
		t.endComment()
	}
}

// endComment sends a comment line between events (a keep-alive, say), or
// drops it, when it was too long to hold: it is not held.
func (t *Stream) endComment() {
	t.send()
	t.fate = eventHeld
}

// field handles a field line of the event stream, as the SSE specification
// reads it.
func (t *Stream) field(field, value []byte) {
	t.midEvent = true
	switch string(field) {
	case "data":
		switch {
		case t.over:
			t.skimData(value)
		case len(t.data)+len(value)+1 > t.limit():
			t.dataOutgrown()
			t.skimData(value)
		default:
			if t.dataLines > 0 {
				t.data = append(t.data, '\n')
			}
			t.data = append(t.data, value...)
		}
		t.dataLines++
	case "event":
		t.event = append(t.event[:0], value...)
	case "id":
		if len(value) > 0 && !sse.IgnoredID(value) && t.era.Resumes() {
			t.resumable = true
		}
		if t.edit && !sse.IgnoredID(value) {
			t.id, t.hasID = append(t.id[:0], value...), true
		}
		t.resume.idField(value)
	case "retry":
		t.resume.retryField(value)
	}
}

// Owed is how many requests of the POST still await their response.
func (t *Stream) Owed() int { return t.owed.left }

// Settle settles the request id answers, as a response in the stream
// would.
func (t *Stream) Settle(id []byte) { t.owed.settle(id) }

// Ended tells the stream that the upstream ended it: a response whose
// event ended with a CR alone is not read by every client (owedResponses'
// tentative), and stays owed.
func (t *Stream) Ended() { t.owed.unconfirm() }

// Stopped is why the gateway stopped reading the stream (overrun.go), nil
// while it reads on.
func (t *Stream) Stopped() error { return t.stop }

// resumeAt is the Last-Event-ID to resume the stream with, and the wait
// its retry field asks for first; ok is false when there is no id the
// gateway can send.
func (t *Stream) resumeAt() (id string, retry time.Duration, ok bool) {
	id, ok = t.resume.lastID()
	return id, t.resume.retry, ok
}
