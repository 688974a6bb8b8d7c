package handler

import (
	"bytes"
	"net/http"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// maxEventData bounds what the tracker keeps of one SSE event to learn
// whether it carries a response. An event beyond it is not read; since it
// might have been the response, a stream that carried one is never repaired.
const maxEventData = 1 << 20

// sseTracker follows an upstream's event-stream answer to a POST, as it is
// written through, to know which requests still await their response and
// whether the client could resume the stream. It never delays, buffers for
// the client, or changes an event, except in edit mode (edit set): each
// event is then held until its blank line, and the response the request
// is owed may be sent rewritten.
type sseTracker struct {
	owed owedResponses
	// era is the request's: whether event ids make a stream resumable, and
	// which error code carries an envelope.
	era era
	// resumable: an event carried an id in an era where the client can
	// reconnect with Last-Event-ID and the server can replay; the gateway
	// must not answer in its place.
	resumable bool
	// unreadable: an event was too large to read.
	unreadable bool
	// partial holds the unterminated last line across writes.
	partial []byte
	// data and event are the fields of the event being received.
	data      []byte
	event     []byte
	dataLines int
	// midEvent: field lines were received since the last dispatch.
	midEvent bool
	// lastCR: the last write ended with a CR, whose LF may start the next.
	lastCR bool
	// onMessage, when set, reads the data of each message event;
	// toolsChanged, when set, is called on each
	// notifications/tools/list_changed.
	onMessage    func(data []byte)
	toolsChanged func()

	// Edit mode. raw holds the bytes received since the last write that
	// are not sent yet, from sent on; lineEnd ends the line being
	// handled; out gathers what a write sends; id is the event's id
	// field, and rewritten the data to send in place of the event's.
	edit      *answerRead
	raw       []byte
	sent      int
	lineEnd   int
	out       []byte
	id        []byte
	hasID     bool
	rewritten []byte
	// begun: the stream's first line was read.
	begun bool
}

// newSSETracker returns a tracker for the answer to msgs, sent in era e, or
// nil when msgs hold no request, which no answer can owe anything.
func newSSETracker(msgs []jsonrpc.Message, e era) *sseTracker {
	t := &sseTracker{era: e}
	if !t.owed.init(msgs) {
		return nil
	}
	return t
}

// repairable reports whether the stream owes responses that only the gateway
// can still give.
func (t *sseTracker) repairable() bool {
	return t.owed.left > 0 && !t.resumable && !t.unreadable
}

// observe follows the bytes the upstream wrote, and returns those to send
// now: p itself, except in edit mode.
func (t *sseTracker) observe(p []byte) ([]byte, error) {
	if t.edit == nil {
		t.scan(p, 0)
		return p, nil
	}
	base := len(t.raw)
	t.raw = append(t.raw, p...)
	t.out = t.out[:0]
	t.scan(p, base)
	if t.unreadable || len(t.raw) > 2*maxEventData {
		// An event too large to hold: it cannot be rewritten.
		if t.edit.failClosed && (t.edit.mayHold == nil || t.edit.mayHold(t.raw[t.sent:])) {
			t.edit.failed, t.raw = errAnswerTooLarge, nil
			return nil, errAnswerTooLarge
		}
		t.out = append(t.out, t.raw[t.sent:]...)
		t.raw, t.edit = nil, nil
		return t.out, nil
	}
	t.raw = append(t.raw[:0], t.raw[t.sent:]...)
	t.sent = 0
	return t.out, nil
}

// scan reads the lines of p, whose first byte is raw's byte base in edit
// mode.
func (t *sseTracker) scan(p []byte, base int) {
	n := len(p)
	if n == 0 {
		return // the CR of a CRLF may still be waiting for its LF
	}
	if t.lastCR && p[0] == '\n' {
		p = p[1:]
	}
	t.lastCR = len(p) > 0 && p[len(p)-1] == '\r'
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			t.appendPartial(p)
			return
		}
		line := p[:i]
		if len(t.partial) > 0 {
			t.appendPartial(line)
			line = t.partial
		}
		// A CR LF pair ends one line.
		end := i
		if p[i] == '\r' && i+1 < len(p) && p[i+1] == '\n' {
			end++
		}
		p = p[end+1:]
		t.lineEnd = base + n - len(p)
		t.line(line)
		t.partial = shrink(t.partial)
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

// startsJSONMessage reports whether an event's data begins as a JSON-RPC
// message or batch does.
func startsJSONMessage(data []byte) bool {
	i := 0
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i < len(data) && (data[i] == '{' || data[i] == '[')
}

var byteOrderMark = []byte("\xef\xbb\xbf")

// send moves the held bytes up to the end of the current line to out.
func (t *sseTracker) send() {
	t.out = append(t.out, t.raw[t.sent:t.lineEnd]...)
	t.sent = t.lineEnd
}

func (t *sseTracker) appendPartial(p []byte) {
	if len(t.partial)+len(p) > maxEventData {
		t.unreadable = true
		return
	}
	t.partial = append(t.partial, p...)
}

// line handles one line of the event stream, as the SSE specification reads
// it.
func (t *sseTracker) line(line []byte) {
	if !t.begun {
		// A stream may begin with a byte order mark, which clients drop.
		t.begun = true
		line = bytes.TrimPrefix(line, byteOrderMark)
	}
	if len(line) == 0 {
		t.dispatch()
		return
	}
	if len(line) > maxEventData {
		// Not read, whatever its field, and however the writes cut it
		// (appendPartial gives up on the same lines).
		t.unreadable = true
		return
	}
	if line[0] == ':' {
		if t.edit != nil && !t.midEvent {
			t.send() // a keep-alive between events is not held
		}
		return // a comment, such as a keep-alive
	}
	t.midEvent = true
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "data":
		if len(t.data)+len(value)+1 > maxEventData {
			t.unreadable = true
			return
		}
		if t.dataLines > 0 {
			t.data = append(t.data, '\n')
		}
		t.data = append(t.data, value...)
		t.dataLines++
	case "event":
		t.event = append(t.event[:0], value...)
	case "id":
		if len(value) > 0 && bytes.IndexByte(value, 0) < 0 && t.era.resumes() {
			t.resumable = true
		}
		if t.edit != nil && bytes.IndexByte(value, 0) < 0 {
			t.id, t.hasID = append(t.id[:0], value...), true
		}
	}
}

// dispatch reads a complete event: a message event carrying a response to a
// pending request settles it.
func (t *sseTracker) dispatch() {
	defer func() {
		t.data, t.event, t.dataLines, t.midEvent = shrink(t.data), t.event[:0], 0, false
		if t.edit != nil {
			t.sendEvent()
		}
	}()
	if t.dataLines == 0 || (len(t.event) > 0 && string(t.event) != "message") {
		return
	}
	// Data that is no JSON object or array (a priming event's empty data,
	// say) is no message a client reads: nothing to edit in it.
	if t.edit != nil && startsJSONMessage(t.data) {
		out, err := t.edit.rewrite(t.data)
		switch {
		case err != nil && t.edit.failClosed:
			t.edit.failed = err
			t.rewritten = t.edit.fail(err)
		case out != nil:
			t.rewritten = out
		}
	}
	_, _ = jsonrpc.Each(t.data, func(m jsonrpc.Message) error {
		switch {
		case m.Kind == jsonrpc.Response:
			t.owed.settle(m.ID)
		case m.Kind == jsonrpc.Notification && t.toolsChanged != nil && string(m.Method) == "notifications/tools/list_changed":
			t.toolsChanged()
		}
		return nil
	})
	if t.onMessage != nil {
		t.onMessage(t.data)
	}
}

// sendEvent sends the event just dispatched: as it came, or with its data
// rewritten (its id kept, other fields dropped).
func (t *sseTracker) sendEvent() {
	if t.rewritten == nil {
		t.send()
		t.hasID = false
		return
	}
	if t.hasID {
		t.out = append(t.out, "id: "...)
		t.out = append(t.out, t.id...)
		t.out = append(t.out, '\n')
	}
	t.out = append(t.out, "event: message\n"...)
	for line := range bytes.SplitSeq(t.rewritten, []byte("\n")) {
		t.out = append(t.out, "data: "...)
		t.out = append(t.out, line...)
		t.out = append(t.out, '\n')
	}
	t.out = append(t.out, '\n')
	t.sent = t.lineEnd
	t.rewritten, t.hasID = nil, false
}

// appendDiscard ends the event the upstream left unfinished so that clients
// drop it: the SSE specification discards an event cut off by the end of a
// stream, but the gateway's own event follows, so the unfinished one is
// named as an event no client reads ("message" is the only one they do).
// An unfinished "id" line gets a NUL, which makes clients ignore the field,
// so that it cannot become the stream's last event id.
func (t *sseTracker) appendDiscard(out []byte) []byte {
	if len(t.partial) > 0 {
		if bytes.HasPrefix(t.partial, []byte("id")) {
			out = append(out, 0)
		}
		out = append(out, '\n')
	}
	return append(out, "event: "+discardedEvent+"\n\n"...)
}

// discardedEvent names the unfinished event of a broken stream.
const discardedEvent = "mcp-gateway-discarded"

// repairStream ends a broken, non-resumable event stream with one message
// event per request still owed a response, each carrying the envelope.
func (h *Handler) repairStream(u *upstreamWatch, what string) error {
	env := streamBroken(what, time.Duration(h.UpstreamRetryAfter))
	h.answered(u.x, &env)
	out := u.sse.appendRepair(nil, &env)
	w := u.ResponseWriterWrapper.ResponseWriter
	if _, err := w.Write(out); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// appendRepair appends the end of the stream: the unfinished event
// discarded, then one message event per request still owed a response,
// carrying env in the form its request needs. Nothing is owed afterwards.
func (t *sseTracker) appendRepair(out []byte, env *envelope.Envelope) []byte {
	if t.midEvent || len(t.partial) > 0 {
		out = t.appendDiscard(out)
	}
	for m := range t.owed.all() {
		out = append(out, "event: message\ndata: "...)
		if isCall(m) {
			out = env.AppendToolResult(out, m.ID)
		} else {
			out = env.AppendRPCError(out, m.ID, t.era.rpcCode(env))
		}
		out = append(out, "\n\n"...)
	}
	t.owed.clear()
	return out
}
