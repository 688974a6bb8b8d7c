package handler

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
	// one are the keys of the only request, when there is one; when there
	// are more, byInt holds those whose id is a small integer by it (the
	// usual batch: see jsonrpc.SmallInt), byKey the others by each key of
	// their ids.
	one   jsonrpc.IDKeys
	byInt map[int64][]int
	byKey map[string][]int
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
			o.one = jsonrpc.ReadID(o.keyBuf[:0], msgs[i].ID)
			continue
		}
		if o.byKey == nil {
			o.byInt, o.byKey = map[int64][]int{}, map[string][]int{}
			o.index(o.first())
		}
		o.index(i)
	}
	return o.left > 0
}

// index files the request msgs[i] under its id's small integer, or each
// key of its id.
func (o *owedResponses) index(i int) {
	if n, ok := jsonrpc.SmallInt(o.msgs[i].ID); ok {
		o.byInt[n] = append(o.byInt[n], i)
		return
	}
	var buf [96]byte
	keys := jsonrpc.ReadID(buf[:0], o.msgs[i].ID)
	for key := range keys.All {
		o.byKey[string(key)] = append(o.byKey[string(key)], i)
	}
}

// first is the index of the first owed request.
func (o *owedResponses) first() int {
	for i, owed := range o.owed {
		if owed {
			return i
		}
	}
	return -1
}

// settle notes the response with this id, and returns the request it
// settled (nil: none). Among the requests it may answer, the one whose id
// has the same bytes is settled first, then the first sent.
func (o *owedResponses) settle(id []byte) *jsonrpc.Message {
	if o.left == 0 || len(id) == 0 || len(id) > maxResponseID {
		return nil
	}
	var buf [96]byte
	keys := jsonrpc.ReadID(buf[:0], id)
	i := -1
	if o.byKey == nil {
		if first := o.first(); bytes.Equal(o.msgs[first].ID, id) || o.one.Shares(&keys) {
			i = first
		}
	} else {
		i = o.pick(&keys, id)
	}
	if i < 0 {
		return nil
	}
	o.owed[i] = false
	o.left--
	if o.byKey != nil {
		o.unindex(i)
	}
	return &o.msgs[i]
}

// pick is the owed request a response with id (whose keys are keys) may
// answer, -1 when none.
func (o *owedResponses) pick(keys *jsonrpc.IDKeys, id []byte) int {
	pick := -1
	consider := func(idx []int) bool {
		for _, i := range idx {
			switch {
			case bytes.Equal(o.msgs[i].ID, id):
				pick = i
				return false
			case pick < 0 || i < pick:
				pick = i
			}
		}
		return true
	}
	for n := range keys.Ints {
		if !consider(o.byInt[n]) {
			return pick
		}
	}
	for key := range keys.All {
		if !consider(o.byKey[string(key)]) {
			return pick
		}
	}
	return pick
}

// unindex removes the settled request msgs[i] from where index filed it,
// so that a batch of many requests with one id settles each in turn.
func (o *owedResponses) unindex(i int) {
	if n, ok := jsonrpc.SmallInt(o.msgs[i].ID); ok {
		o.byInt[n] = without(o.byInt[n], i)
		return
	}
	var buf [96]byte
	keys := jsonrpc.ReadID(buf[:0], o.msgs[i].ID)
	for key := range keys.All {
		o.byKey[string(key)] = without(o.byKey[string(key)], i)
	}
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
func (o *owedResponses) answers(id []byte) bool { return answersAny(o.msgs, id) }

// answersAny reports whether a response with id may answer a request of
// msgs.
func answersAny(msgs []jsonrpc.Message, id []byte) bool {
	for i := range msgs {
		if msgs[i].Kind == jsonrpc.Request && jsonrpc.MayAnswer(msgs[i].ID, id) {
			return true
		}
	}
	return false
}

// errStrayResponse: an answer to a POST holds a response to none of its
// requests, which a client may take for the response to a request it sent
// in another POST: a hook that fails closed does not let it pass.
var errStrayResponse = errors.New("the answer holds a response to no request it was sent for")

// strayResponse reports whether body, the answer to msgs when they hold a
// request, holds a response that answers none of them.
func strayResponse(msgs []jsonrpc.Message, body []byte) bool {
	if !slices.ContainsFunc(msgs, func(m jsonrpc.Message) bool { return m.Kind == jsonrpc.Request }) {
		return false
	}
	stray := false
	_, _ = jsonrpc.Each(body, func(m jsonrpc.Message) error {
		stray = stray || (m.Kind == jsonrpc.Response && !answersAny(msgs, m.ID))
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
// a request id has at most maxIDBytes bytes, and written back with every
// character escaped (\uXXXX for one byte) it has at most six times as many.
const maxResponseID = 6*maxIDBytes + 2
