package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrUncertain is a message that cannot be read with certainty: a member
// given twice, or under another letter case (which readers that fold case
// or keep the last duplicate would read differently).
var ErrUncertain = errors.New("the answer cannot be read with certainty")

// Result finds the result of the response in msg that may answer id (any
// id, when id is nil; see MayAnswer): a zero Member when msg is not that
// response, or is an error response. Every reader of an upstream's answer
// reads it through here, so that two features cannot read one answer two
// ways.
func Result(msg []byte, id json.RawMessage) (Member, error) {
	var (
		result Member
		match  bool
		bad    bool
	)
	err := Members(msg, func(m Member) bool {
		switch {
		case string(m.Key) == "id":
			match = id == nil || MayAnswer(id, msg[m.Start:m.End])
		case string(m.Key) == "result":
			bad = bad || result.Start != 0
			result = m
		case bytes.EqualFold(m.Key, []byte("result")), bytes.EqualFold(m.Key, []byte("id")):
			bad = true
		}
		return !bad
	})
	switch {
	case err != nil:
		return Member{}, errors.Join(ErrUncertain, err)
	case bad:
		return Member{}, ErrUncertain
	case !match:
		return Member{}, nil
	}
	return result, nil
}

// IsResponseTo reports whether msg is a JSON-RPC message whose id may
// answer this one (MayAnswer).
func IsResponseTo(msg []byte, id json.RawMessage) bool {
	match := false
	_ = Members(msg, func(m Member) bool {
		if string(m.Key) == "id" {
			match = MayAnswer(id, msg[m.Start:m.End])
			return false
		}
		return true
	})
	return match
}

// Splice is msg with the value of m replaced.
func Splice(msg []byte, m Member, value []byte) []byte {
	out := make([]byte, 0, len(msg)-(m.End-m.Start)+len(value))
	out = append(out, msg[:m.Start]...)
	out = append(out, value...)
	return append(out, msg[m.End:]...)
}

// StartsMessage reports whether bytes made of these parts could begin a
// JSON-RPC message or batch: after white space, an object or an array.
// Parts that are all white space could still begin one.
func StartsMessage(parts ...[]byte) bool {
	for _, part := range parts {
		for _, c := range part {
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			case '{', '[':
				return true
			}
			return false
		}
	}
	return true
}

// BeginsMessage reports whether data, complete, begins as a JSON-RPC
// message or batch does (white space, then an object or an array): data
// that does not (a priming event's empty data, say) is no message a client
// reads.
func BeginsMessage(data []byte) bool {
	i := 0
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i < len(data) && (data[i] == '{' || data[i] == '[')
}
