package answer

import (
	"bytes"
	"encoding/json"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// A followed stream's complete events: the responses they settle, what the
// hooks read and replace, and the end the gateway writes for a stream that
// broke while it owed responses (stream.go reads the lines).

// dispatch reads a complete event: a message event carrying a response to a
// pending request settles it. In edit mode, the event is then sent: as it
// came, rewritten, or, withheld, in the form the client may have.
func (t *Stream) dispatch() {
	message := t.dataLines > 0 && (len(t.event) == 0 || string(t.event) == "message")
	t.resume.dispatched()
	// The hooks read an event of another type as a message too: the Go
	// SDK's client reads some as one (a type followed by a space, a type
	// field after a byte order mark). It settles no response: the other
	// clients do not read it.
	switch {
	case t.dataLines == 0:
	case t.over && t.cut != nil:
		t.answerCut()
	case t.over:
		if t.skim != nil {
			t.answerUnread(errEventTooLarge)
		}
	default:
		t.read(message)
	}
	if t.edit {
		switch {
		case t.dropped:
			t.fate, t.rewritten = eventWithheld, nil
		case t.fate == eventWithheld && message && !t.over && t.rewritten == nil:
			t.rewritten = t.data // held whole, but not its lines
		}
		t.sendEvent()
	}
	t.data, t.event, t.dataLines, t.midEvent = shrink(t.data), t.event[:0], 0, false
	t.over, t.skim, t.cut, t.cutErr, t.fate, t.dropped, t.probed = false, nil, nil, nil, eventHeld, false, false
}

// read reads the data of an event: the responses it settles (a message
// event's only), the tools it says changed, and, in edit mode, what to
// send in its place.
func (t *Stream) read(message bool) {
	var (
		msg      jsonrpc.Message
		answered *jsonrpc.Message
		stray    bool
	)
	batch, err := jsonrpc.Each(t.data, func(m jsonrpc.Message) error {
		msg = m
		if m.Kind == jsonrpc.Response {
			if message {
				answered = t.owed.settle(m.ID)
			} else {
				answered = t.owed.answering(m.ID)
			}
			stray = stray || (answered == nil && !t.owed.answers(m.ID))
		}
		return nil
	})
	if t.hooks == nil {
		return
	}
	if stray && t.edit && t.hooks.failClosed && t.owed.msgs != nil {
		// A response to no request of this POST: a client may take it for
		// the response to one it sent in another, which no hook here holds
		// to anything. A hook that fails closed does not let it pass.
		t.dropped = true
		return
	}
	// Data that is no JSON object or array (a priming event's empty data,
	// say) is no message a client reads: nothing to edit in it.
	editable := t.edit && t.fate != eventPassing && jsonrpc.BeginsMessage(t.data)
	out, rerr := t.hooks.message(t.fx, t.data, false, editable)
	switch {
	case rerr != nil && (batch || err != nil):
		t.replace(rerr, t.hooks.id)
	case rerr != nil:
		t.answerFor(rerr, msg, answered)
	case out != nil:
		t.rewritten = out
	}
}

// answerFor sends an error, err saying why, in place of the message m
// that a hook refused or could not read, for the request it answers
// (answered, settled already). On a GET's stream, which answers no request
// of its own, a response may be the replay of one that an earlier POST's
// stream owed: the error goes for its id. Anything else gets nothing in
// its place: a notification, a server's request, or a response that
// answers no request still owed.
func (t *Stream) answerFor(err error, m jsonrpc.Message, answered *jsonrpc.Message) {
	switch {
	case answered != nil:
		t.replace(err, answered.ID)
	case m.Kind == jsonrpc.Response && t.owed.msgs == nil:
		t.replace(err, m.ID)
	default:
		t.dropped = true
	}
}

// limit is what the tracker holds of an event's data, and of a line.
func (t *Stream) limit() int { return max(maxEventData, t.maxData) }

// dataOutgrown handles an event whose data outgrew what is held of it:
// what was kept of it is let go, or, when the event is withheld, skimmed
// first, and given to the hook that answers for it, if one does.
func (t *Stream) dataOutgrown() {
	t.over = true
	t.outgrown()
	if t.fate == eventWithheld {
		t.skim = jsonrpc.NewSkimmer(maxResponseID)
		t.skim.Write(t.data)
		if c := t.hooks.cutter(); c != nil {
			t.cut = c.Cut(t.fx)
			if !t.cut.Write(t.data) {
				t.cutGaveUp()
			}
		}
	}
	t.data = shrink(t.data)
}

// skimData gives the next data line's value to the skimmer and the cut,
// if the event has them.
func (t *Stream) skimData(value []byte) {
	if t.skim == nil {
		return
	}
	t.skimBreak()
	t.skimWrite(value)
}

// skimBreak gives them the line break before a data line's value, but the
// event's first.
func (t *Stream) skimBreak() {
	if t.skim != nil && t.dataLines > 0 {
		t.skimWrite(newline)
	}
}

// skimWrite gives the skimmer and the cut, if the event has one, the next
// bytes of the event's data.
func (t *Stream) skimWrite(p []byte) {
	t.skim.Write(p)
	if t.cut != nil && !t.cut.Write(p) {
		t.cutGaveUp()
	}
}

var newline = []byte("\n")

// answerUnread answers for a withheld message event whose data was too
// large to read, why saying why (see answerFor); when what it is cannot be
// known with certainty, for the request the stream answers (none on a
// GET's stream), which it may be the response to.
func (t *Stream) answerUnread(why error) {
	m, err := t.skim.Message()
	switch {
	case err != nil:
		t.replace(why, t.hooks.id)
	case m.Kind == jsonrpc.Response:
		t.answerFor(why, m, t.owed.settle(m.ID))
	default:
		t.dropped = true
	}
}

// answerCut sends what the hook that cut a withheld event's data makes of
// it, given to the hooks as a message of its own: the call's response, cut
// to fit. When it makes nothing of it, the event is answered for as
// unread.
func (t *Stream) answerCut() {
	out, err := t.cut.Close()
	if err != nil {
		t.answerUnread(err)
		return
	}
	t.owed.settle(t.hooks.id)
	t.rewritten = out
	if edited, herr := t.hooks.message(t.fx, out, false, true); herr != nil {
		t.replace(herr, t.hooks.id)
	} else if edited != nil {
		t.rewritten = edited
	}
}

// replace sends an error in place of a message event that could not be
// read, err saying why, for id: the request it answers, which is
// settled (nil: none, on a GET's stream).
func (t *Stream) replace(err error, id json.RawMessage) {
	if id != nil {
		t.owed.settle(id)
	}
	t.rewritten = t.fail(err, id)
}

// sendEvent sends the event just dispatched: as it came, rewritten (its id
// kept, other fields dropped), or, withheld with nothing in its place, not
// at all.
func (t *Stream) sendEvent() {
	if t.rewritten == nil {
		t.send()
		t.hasID = false
		return
	}
	// As a message event, whatever its type was: a client may have read
	// one of another type as a message, and every client reads this one.
	t.out = sse.AppendMessage(t.out, t.id, t.hasID, t.rewritten)
	t.sent, t.kept = t.lineEnd, false
	t.rewritten, t.hasID = nil, false
}

// appendDiscard ends the event the upstream left unfinished so that clients
// drop it: the SSE specification discards an event cut off by the end of a
// stream, but the gateway's own event follows, so the unfinished one is
// named as an event no client reads ("message" is the only one they do).
// An unfinished "id" line gets a NUL, which makes clients ignore the field,
// so that it cannot become the stream's last event id.
func (t *Stream) appendDiscard(out []byte) []byte {
	if t.sc.Unfinished() {
		// As clients read it: a byte order mark opening the stream is
		// not part of its first line.
		if bytes.HasPrefix(t.sc.HeldLine(), []byte("id")) || (t.sc.Long() && t.longField == longID) {
			out = append(out, 0)
		}
		out = append(out, '\n')
	}
	return sse.AppendEvent(out, discardedEvent)
}

// discardedEvent names the unfinished event of a broken stream.
const discardedEvent = "mcp-gateway-discarded"

// AppendRepair appends the end of the stream: the unfinished event
// discarded, then one message event per request still owed a response,
// carrying env in the form its request needs. Nothing is owed afterwards.
func (t *Stream) AppendRepair(out []byte, env *envelope.Envelope) []byte {
	return t.AppendOwed(t.AppendUnfinished(out), env)
}

// AppendUnfinished appends what discards the event the upstream left
// unfinished, if it did.
func (t *Stream) AppendUnfinished(out []byte) []byte {
	if t.midEvent || t.sc.Unfinished() {
		out = t.appendDiscard(out)
	}
	return out
}

// AppendOwed appends one message event per request still owed a response,
// carrying env in the form its request needs, and settles them all.
func (t *Stream) AppendOwed(out []byte, env *envelope.Envelope) []byte {
	var data []byte
	for m := range t.owed.all() {
		if feature.IsCall(m) {
			data = env.AppendToolResult(data[:0], m.ID)
		} else {
			data = env.AppendRPCError(data[:0], m.ID, t.era.RPCCode(env))
		}
		out = sse.AppendMessage(out, nil, false, data)
	}
	t.owed.clear()
	return out
}
