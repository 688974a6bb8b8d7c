package jsonrpc

import "bytes"

// Learning what a message is, alone or in a batch: its kind, method and
// id, and the name, uri and taskId of its params, read from the members
// whose keys name ours.

// batch reads the elements of a batch, the scanner at its '[': each object
// as a message, anything else as a value that is no message.
func (s *scanner) batch(visit func(Message) error) error {
	s.i++ // '['
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		var m Message
		var err error
		if s.peek() == '{' {
			err = s.message(&m, 2)
		} else {
			err = s.value(1)
		}
		if err == nil {
			err = visit(m)
		}
		if err != nil {
			return err
		}
		s.ws()
		if s.peek() != ',' {
			return s.expect(']')
		}
		s.i++
	}
}

// message reads one object at the given depth, learning its JSON-RPC
// members.
func (s *scanner) message(m *Message, depth int) error {
	var hasMethod, hasResult, methodIsString bool
	err := s.object(depth, jsonrpcMembers, func(bit uint8) error {
		if bit == 0 {
			return s.value(depth)
		}
		switch bit {
		case memberMethod:
			hasMethod = true
			if s.peek() == '"' {
				methodIsString = true
				var err error
				m.Method, err = s.str()
				return err
			}
		case memberID:
			start := s.i
			if err := s.value(depth); err != nil {
				return err
			}
			m.ID = s.b[start:s.i]
			return nil
		case memberParams:
			if s.peek() == '{' {
				return s.params(m, depth+1)
			}
		case memberResult, memberError:
			hasResult = true
		}
		return s.value(depth)
	})
	if err != nil {
		return err
	}
	switch {
	case hasMethod && !methodIsString:
		m.Kind = Invalid
	case hasMethod && m.ID != nil:
		m.Kind = Request
	case hasMethod:
		m.Kind = Notification
	case hasResult && m.ID != nil:
		m.Kind = Response
	}
	return nil
}

// params reads the params object at the given depth, learning "name",
// "uri" and "taskId" and skipping the rest (the arguments above all)
// without decoding it.
func (s *scanner) params(m *Message, depth int) error {
	return s.object(depth, paramsMembers, func(bit uint8) error {
		var dst *[]byte
		switch bit {
		case memberName:
			dst = &m.Name
		case memberURI:
			dst = &m.URI
		case memberTaskID:
			dst = &m.TaskID
		}
		if dst == nil || s.peek() != '"' {
			return s.value(depth)
		}
		var err error
		if *dst, err = s.str(); err == nil && s.head != nil && depth == 2 && s.head(*m) {
			s.head = nil
		}
		return err
	})
}

const (
	memberJSONRPC uint8 = 1 << iota
	memberMethod
	memberID
	memberParams
	memberResult
	memberError
	// The members of params. A bit need only be distinct among the members
	// of one object (object keeps what it has seen per object), so these
	// reuse the bits of the message's members.
	memberName   = memberJSONRPC
	memberURI    = memberMethod
	memberTaskID = memberID
)

type member struct {
	name string
	bit  uint8
}

var (
	jsonrpcMembers = []member{
		{"jsonrpc", memberJSONRPC}, {"method", memberMethod}, {"id", memberID},
		{"params", memberParams}, {"result", memberResult}, {"error", memberError},
	}
	paramsMembers = []member{{"name", memberName}, {"uri", memberURI}, {"taskId", memberTaskID}}
)

// memberBit names the member key is, or 0 when it is none of ours. A key
// that is one of ours in another letter case is none of ours, and makes the
// scan ambiguous. Case is folded as encoding/json folds it, Unicode included:
// "paramſ" (with a long s) is params to Go's decoder, though longer in bytes.
func (s *scanner) memberBit(key []byte, members []member) uint8 {
	for _, mb := range members {
		if string(key) == mb.name {
			return mb.bit
		}
		if bytes.EqualFold(key, []byte(mb.name)) {
			s.ambiguous = true
			return 0
		}
	}
	return 0
}
