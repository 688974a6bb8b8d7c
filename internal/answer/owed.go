package answer

import (
	"bytes"
	"errors"
	"iter"
	"slices"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// owedResponses are the requests of an exchange whose responses an event
// stream has not carried yet. A response settles the request it may answer
// (jsonrpc.MayAnswer: the same id, or one a client reads as the same), in
// time that does not grow with the batch, whatever the order of the
// answers.
type owedResponses struct {
	msgs []jsonrpc.Message
	// owed[i] reports whether msgs[i] still awaits its response; left
	// counts them.
	owed []bool
	left int
	// one are the keys of the only request, msgs[oneAt], when there is
	// one; when there are more, owedIndex files those still owed, and
	// sent all of them.
	one             jsonrpc.IDKeys
	oneAt           int
	owedIndex, sent *idIndex
	// tentative: the responses settled now come in an event whose blank
	// line ended with a CR the stream has not followed yet; unconfirmed
	// are their requests. A client that takes a CR for a line's end only
	// once the next byte comes (the TypeScript SDK's parser: it may be a
	// CRLF) never reads that event if the stream ends there.
	tentative   bool
	unconfirmed []int
	// oneBuf and keyBuf back owed and one for a single message, the usual
	// case, without allocating.
	oneBuf [1]bool
	keyBuf [64]byte
}

// init sets up the requests of msgs as owed, and reports whether there is
// any.
func (o *owedResponses) init(msgs []jsonrpc.Message) bool {
	o.msgs = msgs
	o.owed = o.oneBuf[:0]
	if len(msgs) > 1 {
		o.owed = make([]bool, 0, len(msgs))
	}
	o.owed = o.owed[:len(msgs)]
	for i := range msgs {
		if msgs[i].Kind != jsonrpc.Request {
			continue
		}
		o.owed[i] = true
		o.left++
		if o.left == 1 {
			o.one, o.oneAt = jsonrpc.ReadID(o.keyBuf[:0], msgs[i].ID), i
			continue
		}
		if o.sent == nil {
			o.owedIndex, o.sent = newIDIndex(), newIDIndex()
			o.owedIndex.add(o.oneAt, msgs[o.oneAt].ID)
			o.sent.add(o.oneAt, msgs[o.oneAt].ID)
		}
		o.owedIndex.add(i, msgs[i].ID)
		o.sent.add(i, msgs[i].ID)
	}
	return o.left > 0
}

// settle notes the response with this id, and returns the request it
// settled (nil: none). Among the requests it may answer, the one whose id
// has the same bytes is settled first, then the first sent.
func (o *owedResponses) settle(id []byte) *jsonrpc.Message {
	if o.left == 0 {
		return nil
	}
	i := o.find(o.owedIndex, id)
	if i < 0 || !o.owed[i] {
		return nil
	}
	o.owed[i] = false
	o.left--
	if o.owedIndex != nil {
		o.owedIndex.remove(i, o.msgs[i].ID)
	}
	if o.tentative {
		o.unconfirmed = append(o.unconfirmed, i)
	}
	return &o.msgs[i]
}

// confirm notes that the stream went on after the CR that ended the last
// event: every client has read it.
func (o *owedResponses) confirm() { o.unconfirmed = o.unconfirmed[:0] }

// unconfirm owes again, the stream having ended, the responses of an event
// whose CR no byte followed.
func (o *owedResponses) unconfirm() {
	for _, i := range o.unconfirmed {
		o.owed[i] = true
		o.left++
		if o.owedIndex != nil {
			o.owedIndex.add(i, o.msgs[i].ID)
		}
	}
	o.confirm()
}

// answering is the request of the exchange, owed or answered already, a
// client may take a response with id for (nil: none): the one whose id
// has the same bytes first, then the first sent.
func (o *owedResponses) answering(id []byte) *jsonrpc.Message {
	if i := o.find(o.sent, id); i >= 0 {
		return &o.msgs[i]
	}
	return nil
}

// find is the request of index (the only request, without one) that a
// response with id may answer, -1 when none.
func (o *owedResponses) find(index *idIndex, id []byte) int {
	if len(id) == 0 || len(id) > maxResponseID || (o.sent == nil && o.one.Empty()) {
		return -1
	}
	var buf [96]byte
	keys := jsonrpc.ReadID(buf[:0], id)
	if index == nil {
		if bytes.Equal(o.msgs[o.oneAt].ID, id) || o.one.Shares(&keys) {
			return o.oneAt
		}
		return -1
	}
	return index.pick(o.msgs, &keys, id)
}

// idIndex files requests by what a response's id may be read as: by the
// small integer of an id that is one (every reading reads it so, see
// jsonrpc.SmallInt), by each key of any other.
type idIndex struct {
	byInt map[int64][]int
	byKey map[string][]int
}

func newIDIndex() *idIndex {
	return &idIndex{byInt: map[int64][]int{}, byKey: map[string][]int{}}
}

// add files the request i, whose id is id.
func (x *idIndex) add(i int, id []byte) {
	if n, ok := jsonrpc.SmallInt(id); ok {
		x.byInt[n] = append(x.byInt[n], i)
		return
	}
	var buf [96]byte
	keys := jsonrpc.ReadID(buf[:0], id)
	for key := range keys.All {
		x.byKey[string(key)] = append(x.byKey[string(key)], i)
	}
}

// remove takes the request i, whose id is id, out of the index, so that a
// batch of many requests with one id settles each in turn.
func (x *idIndex) remove(i int, id []byte) {
	if n, ok := jsonrpc.SmallInt(id); ok {
		x.byInt[n] = without(x.byInt[n], i)
		return
	}
	var buf [96]byte
	keys := jsonrpc.ReadID(buf[:0], id)
	for key := range keys.All {
		x.byKey[string(key)] = without(x.byKey[string(key)], i)
	}
}

// pick is the request filed that a response with id (whose keys are keys)
// may answer: the one whose id has the same bytes, or the first sent; -1
// when none.
func (x *idIndex) pick(msgs []jsonrpc.Message, keys *jsonrpc.IDKeys, id []byte) int {
	pick := -1
	consider := func(idx []int) bool {
		for _, i := range idx {
			switch {
			case bytes.Equal(msgs[i].ID, id):
				pick = i
				return false
			case pick < 0 || i < pick:
				pick = i
			}
		}
		return true
	}
	for n := range keys.Ints {
		if !consider(x.byInt[n]) {
			return pick
		}
	}
	for key := range keys.All {
		if !consider(x.byKey[string(key)]) {
			return pick
		}
	}
	return pick
}

// without is idx without i.
func without(idx []int, i int) []int {
	if j := slices.Index(idx, i); j >= 0 {
		return slices.Delete(idx, j, j+1)
	}
	return idx
}

// answers reports whether a response with id may answer a request of the
// exchange, owed or answered already.
func (o *owedResponses) answers(id []byte) bool { return o.answering(id) != nil }

// errStrayResponse: an answer to a POST holds a response to none of its
// requests, which a client may take for the response to a request it sent
// in another POST: a hook that fails closed does not let it pass.
var errStrayResponse = errors.New("the answer holds a response to no request it was sent for")

// strayResponse reports whether body, the answer to msgs when they hold a
// request, holds a response that answers none of them.
func strayResponse(msgs []jsonrpc.Message, body []byte) bool {
	var o owedResponses
	if !o.init(msgs) {
		return false
	}
	stray := false
	_, _ = jsonrpc.Each(body, func(m jsonrpc.Message) error {
		stray = stray || (m.Kind == jsonrpc.Response && !o.answers(m.ID))
		return nil
	})
	return stray
}

// all yields the requests still owed, in the order they were sent.
func (o *owedResponses) all() iter.Seq[*jsonrpc.Message] {
	return func(yield func(*jsonrpc.Message) bool) {
		for i, owed := range o.owed {
			if owed && !yield(&o.msgs[i]) {
				return
			}
		}
	}
}

// clear settles everything.
func (o *owedResponses) clear() {
	clear(o.owed)
	o.left = 0
}

// maxResponseID bounds the ids of responses compared with the requests' ids:
// a request id has at most jsonrpc.MaxID bytes, and written back with every
// character escaped (\uXXXX for one byte) it has at most six times as many.
const maxResponseID = 6*jsonrpc.MaxID + 2
