package answer

import (
	"encoding/json"
	"net/http"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// Hooks are the hooks the features opened on one answer, in the
// order the features are configured, and what they
// need of it together: the core holds the answer when one edits, reads a
// JSON answer up to the largest bound any of them reads, and fails closed
// when one does.
type Hooks struct {
	buf  [4]feature.Hook
	list []feature.Hook
	// edit: a hook may replace messages; failClosed: one fails closed; max:
	// the largest bound of a JSON answer one reads (0: none reads one), and
	// maxEvent of an event's data, when one reads more than the core's.
	edit, failClosed bool
	max, maxEvent    int
	// readers is the number of hooks that read messages; headers: a hook
	// rewrites the answer's header (feature.HeaderHook).
	readers int
	headers bool
	// id is the request's, when a hook edits (nil on a GET, or for a body
	// that is not one request), for what is sent in place of an answer
	// not read.
	id    json.RawMessage
	ended bool
	// stopAt is the bound of the first hook that fails closed, when it
	// refuses a response past it rather than cutting it: an event that may
	// be the response owed is not read past it (overrun.go).
	stopAt int
}

// open opens the responders' hooks on the answer to x, then those of the
// admitters' state that is a Responder (feature.Undo), then trace (nil:
// none); it reports whether any has a say in the answer.
func (hs *Hooks) open(responders []feature.Responder, undos []feature.Undo, x *feature.Exchange, trace feature.Hook) bool {
	hs.list = hs.buf[:0]
	for _, r := range responders {
		hs.add(r.Open(x))
	}
	for _, u := range undos {
		if responds(u) {
			hs.add(u.(feature.Responder).Open(x))
		}
	}
	hs.add(trace)
	if len(hs.list) == 0 {
		return false
	}
	if m := x.Single(); m != nil && hs.edit {
		// For what is sent in place of a message the hooks cannot read;
		// the body's buffer may be replaced meanwhile (a streamed body).
		hs.id = append(json.RawMessage(nil), m.ID...)
	}
	if first := hs.firstFailClosed(); first != nil {
		if _, cuts := first.(feature.Cutter); !cuts {
			hs.stopAt = first.Needs().Max
		}
	}
	return true
}

// firstFailClosed is the first hook that fails closed (nil: none), whose
// words answer for what the hooks cannot read.
func (hs *Hooks) firstFailClosed() feature.Hook {
	for _, hook := range hs.list {
		if hook.Needs().FailClosed {
			return hook
		}
	}
	return nil
}

// add adds an opened hook (nil: none was).
func (hs *Hooks) add(hook feature.Hook) {
	if hook == nil {
		return
	}
	n := hook.Needs()
	hs.list = append(hs.list, hook)
	if _, ok := hook.(feature.HeaderHook); ok {
		hs.headers = true
	}
	if n.HeaderOnly {
		return
	}
	hs.readers++
	hs.edit = hs.edit || n.Edit || n.FailClosed // what fails closed is held
	hs.failClosed = hs.failClosed || n.FailClosed
	hs.max = max(hs.max, n.Max)
	hs.maxEvent = max(hs.maxEvent, n.MaxEvent)
}

// responds reports whether what an admitter kept of a request opens hooks
// on its answer: a Responder that does not linger (what lingers may be
// given back before the answer ends).
func responds(u feature.Undo) bool {
	_, ok := u.(feature.Responder)
	_, lingers := u.(feature.Lingering)
	return ok && !lingers
}

// active reports whether any hook reads the answer.
func (hs *Hooks) active() bool { return hs.readers > 0 }

// message gives msg to the hooks in order, each seeing what the one before
// it let through, and returns what to send instead (nil: msg as it is).
// whole: msg is a JSON answer (each hook reads it only within its bound);
// otherwise it is an event's data. editable: the hooks that edit may see
// it (an event passing unread, or data that is no JSON-RPC, is given only
// to those that watch). err is the first error of a hook that fails
// closed: msg must not be sent.
func (hs *Hooks) message(x *feature.Exchange, msg []byte, whole, editable bool) (out []byte, err error) {
	cur := msg
	for _, hook := range hs.list {
		n := hook.Needs()
		// A hook that fails closed reads what the core holds past its Max
		// (for another hook): it must not pass unread.
		if n.HeaderOnly || (whole && len(cur) > n.Max && !n.FailClosed) || ((n.Edit || n.FailClosed) && !editable) {
			continue
		}
		got, herr := hook.Message(x, cur)
		switch {
		case herr != nil && n.FailClosed:
			return nil, herr
		case herr == nil && got != nil && n.Edit:
			cur, out = got, got
		}
	}
	return out, nil
}

// Unreadable is the envelope sent in place of what the hooks could not
// read: the first hook that fails closed says it.
func (hs *Hooks) Unreadable(x *feature.Exchange, err error) envelope.Envelope {
	if hook := hs.firstFailClosed(); hook != nil {
		return hook.Unreadable(x, err)
	}
	return envelope.New(envelope.InternalError, err.Error()).Envelope()
}

// cutter is the first hook that fails closed, when it answers itself for
// a message too large to hold (feature.Cutter).
func (hs *Hooks) cutter() feature.Cutter {
	c, _ := hs.firstFailClosed().(feature.Cutter)
	return c
}

// End tells the hooks how the answer ended, once.
func (hs *Hooks) End(x *feature.Exchange, e feature.Ending) {
	if hs.ended {
		return
	}
	hs.ended = true
	for _, hook := range hs.list {
		hook.End(x, e)
	}
}

// header gives the header the upstream writes under status to the hooks
// that rewrite it.
func (hs *Hooks) header(x *feature.Exchange, status int, h http.Header) {
	if !hs.headers {
		return
	}
	for _, hook := range hs.list {
		if hh, ok := hook.(feature.HeaderHook); ok {
			hh.Header(x, status, h)
		}
	}
}

// trailer gives the header, the upstream's trailers copied into it, to
// the hooks that rewrite it.
func (hs *Hooks) trailer(x *feature.Exchange, h http.Header) {
	if !hs.headers {
		return
	}
	for _, hook := range hs.list {
		if hh, ok := hook.(feature.HeaderHook); ok {
			hh.Trailer(x, h)
		}
	}
}

// Unreached is the first answer a hook gives for an upstream the proxy
// could not reach (feature.Unreached), nil when none answers.
func (hs *Hooks) Unreached(x *feature.Exchange, err error) *feature.Refusal {
	for _, hook := range hs.list {
		if u, ok := hook.(feature.Unreached); ok {
			if ref := u.Unreached(x, err); ref != nil {
				return ref
			}
		}
	}
	return nil
}

// ID is the request's id, when a hook edits (nil on a GET, or for a body
// that is not one request).
func (hs *Hooks) ID() json.RawMessage { return hs.id }

// List is the hooks opened, in order.
func (hs *Hooks) List() []feature.Hook { return hs.list }
