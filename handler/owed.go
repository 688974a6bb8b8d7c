package handler

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"iter"
	"math"
	"strconv"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// owedResponses are the requests of an exchange whose responses an event
// stream has not carried yet. A response settles the request with the same
// id in constant time, whatever the size of the batch and the order of the
// answers.
type owedResponses struct {
	msgs []jsonrpc.Message
	// owed[i] reports whether msgs[i] still awaits its response; left
	// counts them.
	owed []bool
	left int
	// one is the key of the only request, when there is one; byKey holds
	// the requests by key when there are more.
	one   []byte
	byKey map[string][]int
	// oneBuf and keyBuf back owed and one for a single message, the usual
	// case, without allocating.
	oneBuf [1]bool
	keyBuf [24]byte
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
	var scratch []byte
	for i := range msgs {
		if msgs[i].Kind != jsonrpc.Request {
			continue
		}
		o.owed[i] = true
		o.left++
		if o.left == 1 {
			o.one = appendIDKey(o.keyBuf[:0], msgs[i].ID)
			continue
		}
		if o.byKey == nil {
			o.byKey = map[string][]int{string(o.one): {o.first()}}
		}
		scratch = appendIDKey(scratch[:0], msgs[i].ID)
		o.byKey[string(scratch)] = append(o.byKey[string(scratch)], i)
	}
	return o.left > 0
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

// settle notes the response with this id. Servers may write an id back in
// another spelling ("caf\u00e9" as "café", 1e2 as 100, and, in JavaScript,
// any number as the nearest float64), so ids are compared by value (see
// appendIDKey). Among requests with the same value, the one whose id has the
// same bytes is settled first.
func (o *owedResponses) settle(id []byte) {
	if o.left == 0 || len(id) > maxResponseID {
		return
	}
	var buf [64]byte
	key := appendIDKey(buf[:0], id)
	if o.byKey == nil {
		if i := o.first(); bytes.Equal(key, o.one) {
			o.owed[i] = false
			o.left--
		}
		return
	}
	idx := o.byKey[string(key)]
	if len(idx) == 0 {
		return
	}
	pick := 0
	for j, i := range idx {
		if bytes.Equal(o.msgs[i].ID, id) {
			pick = j
			break
		}
	}
	o.owed[idx[pick]] = false
	o.left--
	o.byKey[string(key)] = append(idx[:pick], idx[pick+1:]...)
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

// appendIDKey appends a key for the value of a JSON-RPC id: two ids have the
// same key when a server may have meant one by the other. A string is its
// decoded text; a number is its value as a float64, as JavaScript servers
// read and write ids (so 100, 1e2 and 100.0 are one id, and so are two
// integers too large for a float64 to tell apart); null and anything else
// are their bytes.
func appendIDKey(dst, id []byte) []byte {
	switch {
	case len(id) == 0:
		return dst
	case id[0] == '"':
		if bytes.IndexByte(id, '\\') < 0 {
			return append(append(dst, 's'), id[1:len(id)-1]...)
		}
		var s string
		if json.Unmarshal(id, &s) != nil {
			return append(append(dst, 'r'), id...)
		}
		return append(append(dst, 's'), s...)
	case id[0] == '-' || (id[0] >= '0' && id[0] <= '9'):
		f, err := strconv.ParseFloat(string(id), 64)
		if err != nil && f == 0 {
			return append(append(dst, 'r'), id...)
		}
		if f == 0 {
			f = 0 // -0 is 0
		}
		return binary.BigEndian.AppendUint64(append(dst, 'n'), math.Float64bits(f))
	}
	return append(append(dst, 'r'), id...)
}
