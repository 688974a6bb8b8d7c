package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// Which response answers which request. A server may write a request's id
// back in another spelling, and each official client matches a response
// to its request in its own way:
//
//   - every reader: by value, a string by its text ("caf\u00e9" is "café"),
//     a number by its value as a float64 (1, 1.0 and 1e0 are one id);
//   - the TypeScript SDK: by Number(id), so the string "1", " 1" or "0x1"
//     answers the request 1 (Protocol._onresponse);
//   - the Go SDK: a number truncated to an int64, so 1.5 answers 1
//     (jsonrpc2.MakeID);
//   - the Python SDK: a string int() reads as its integer, so "1", " 1 "
//     and "1_0" answer 1 and 10 (BaseSession._normalize_request_id).
//
// A response may answer a request when one of these readings reads both
// ids as one. The gateway decides it here, once, for every feature and for
// the responses an event stream owes, so that no reader of an answer is
// less generous than a client: whatever a client would take as a call's
// response is held to what the features hold that response to.

// reading is one way a client reads an id.
type reading uint8

const (
	byValue reading = iota
	byNumber
	byInt64
	byInt
	readings
)

// Each reading's keys begin with a tag of their own, so that keys of two
// readings never meet.
var readingTags = [readings]byte{byValue: 'v', byNumber: 'j', byInt64: 'g', byInt: 'p'}

// IDKeys are an id's keys, one per reading that reads it (at most four,
// in one buffer): a response may answer a request when the two share a
// key.
type IDKeys struct {
	buf  []byte
	ends [readings]int
	has  [readings]bool
	// ints are the readings that read the id as a small integer (see
	// SmallInt), and their values.
	ints  [readings]int64
	isInt [readings]bool
}

// ReadID returns the keys of id (a JSON value as written), appending them
// to dst's backing array.
func ReadID(dst, id []byte) IDKeys {
	k := IDKeys{buf: dst[:0]}
	isString := len(id) > 0 && id[0] == '"'
	for r := range readings {
		start := len(k.buf)
		k.buf = append(k.buf, readingTags[r])
		var ok bool
		k.buf, ok = appendReading(k.buf, id, r)
		if !ok {
			k.buf = k.buf[:start]
		} else {
			k.ints[r], k.isInt[r] = smallIntOf(k.buf[start+1:], r, isString)
		}
		k.ends[r], k.has[r] = len(k.buf), ok
	}
	return k
}

// SmallInt reads an id written as an integer of at most 15 digits, which
// a float64 holds exactly: every reading reads such an id n as n, so that
// a response answers it exactly when one of its readings reads n (Ints).
func SmallInt(id []byte) (int64, bool) { return smallInt(id) }

// Ints yields the small integers the id's readings read it as.
func (k *IDKeys) Ints(yield func(int64) bool) {
	for r := range readings {
		if k.isInt[r] && !yield(k.ints[r]) {
			return
		}
	}
}

// smallIntOf is the small integer a reading's key says, when it says one.
func smallIntOf(key []byte, r reading, isString bool) (int64, bool) {
	const most = 999_999_999_999_999 // 15 digits
	switch {
	case r == byInt:
		return smallInt(key)
	case r == byInt64:
		n := int64(binary.BigEndian.Uint64(key))
		return n, n >= -most && n <= most
	case r == byValue && isString, len(key) != 8:
		return 0, false
	}
	f := math.Float64frombits(binary.BigEndian.Uint64(key))
	return int64(f), f == math.Trunc(f) && f >= -most && f <= most
}

// Empty reports whether no reading reads the id (no id was read).
func (k *IDKeys) Empty() bool { return k.has == [readings]bool{} }

// All yields each key of the id.
func (k *IDKeys) All(yield func([]byte) bool) {
	start := 0
	for r := range readings {
		if k.has[r] && !yield(k.buf[start:k.ends[r]]) {
			return
		}
		start = k.ends[r]
	}
}

// key is the key of reading r, nil when r does not read the id.
func (k *IDKeys) key(r reading) []byte {
	if !k.has[r] {
		return nil
	}
	start := 0
	if r > 0 {
		start = k.ends[r-1]
	}
	return k.buf[start:k.ends[r]]
}

// Shares reports whether a reading reads both ids as one.
func (k *IDKeys) Shares(o *IDKeys) bool {
	for r := range readings {
		if a, b := k.key(r), o.key(r); a != nil && b != nil && bytes.Equal(a, b) {
			return true
		}
	}
	return false
}

// MayAnswer reports whether a client may take a response with the id
// response as the response to the request with the id request (both JSON
// values as written): the same id, or one a client reads as the same.
func MayAnswer(request, response []byte) bool {
	if len(request) == 0 || len(response) == 0 {
		return false
	}
	if bytes.Equal(request, response) {
		return true
	}
	var a, b [96]byte
	req, resp := ReadID(a[:0], request), ReadID(b[:0], response)
	return req.Shares(&resp)
}

// appendReading appends the key of id as reading r reads it, ok false when
// r does not read it (the message is no response to that client, or its
// id matches none of the client's requests but by its bytes).
func appendReading(dst, id []byte, r reading) (_ []byte, ok bool) {
	if len(id) == 0 {
		return dst, false
	}
	if n, ok := smallInt(id); ok {
		// The usual id, read alike by every reading, without allocating.
		switch r {
		case byInt64:
			return binary.BigEndian.AppendUint64(dst, uint64(n)), true
		case byInt:
			return strconv.AppendInt(dst, n, 10), true
		}
		return appendFloat(dst, float64(n)), true
	}
	isString := id[0] == '"'
	isNumber := id[0] == '-' || (id[0] >= '0' && id[0] <= '9')
	switch {
	case r == byValue && isString:
		return appendText(dst, id)
	case r == byValue && isNumber:
		f, ok := parseNumber(id)
		if !ok {
			return dst, false // no number: matched by its bytes only
		}
		return appendFloat(dst, f), true
	case r == byValue:
		return append(dst, id...), true // null, or a value no id is
	case r == byNumber:
		return appendJSNumber(dst, id, isString, isNumber)
	case r == byInt64 && isNumber:
		f, ok := parseNumber(id)
		if !ok || f < -(1<<63) || f >= 1<<63 {
			return dst, false
		}
		return binary.BigEndian.AppendUint64(dst, uint64(int64(f))), true
	case r == byInt && isNumber:
		return appendIntegral(dst, id)
	case r == byInt && isString:
		return appendPythonInt(dst, id)
	}
	return dst, false
}

// smallInt reads an id written as an integer of at most 15 digits, which
// a float64 holds exactly.
func smallInt(id []byte) (int64, bool) {
	digits := id
	if len(id) > 0 && id[0] == '-' {
		digits = id[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if !isDigit(c) {
			return 0, false
		}
		n = 10*n + int64(c-'0')
	}
	if len(digits) < len(id) {
		n = -n
	}
	return n, true
}

// parseNumber is a JSON number's value as a float64, as JSON decoders read
// it: past the range of a float64, an infinity or a zero.
func parseNumber(id []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(id), 64)
	return f, err == nil || errors.Is(err, strconv.ErrRange)
}

// appendText appends the text of a JSON string.
func appendText(dst, id []byte) ([]byte, bool) {
	if len(id) >= 2 && id[len(id)-1] == '"' && bytes.IndexByte(id, '\\') < 0 {
		return append(dst, id[1:len(id)-1]...), true
	}
	var s string
	if json.Unmarshal(id, &s) != nil {
		return append(dst, id...), true
	}
	return append(dst, s...), true
}

// appendFloat appends a number's value (-0 is 0: no reader tells them
// apart when matching).
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		f = 0
	}
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(f))
}

// stringText is the text of a string id: its bytes between the quotes,
// without allocating, when it has no escape (the usual case).
func stringText(id []byte) ([]byte, bool) {
	if len(id) >= 2 && id[len(id)-1] == '"' && bytes.IndexByte(id, '\\') < 0 {
		return id[1 : len(id)-1], true
	}
	var s string
	if json.Unmarshal(id, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// MaxID bounds a request id, as sent, that the gateway takes: ids are
// echoed in every answer and compared with every response of an event
// stream.
const MaxID = 256
