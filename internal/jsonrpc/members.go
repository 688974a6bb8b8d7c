package jsonrpc

import "bytes"

// Learning what a message is, alone or in a batch: its kind, method and
// id, the name, uri and taskId of its params, read from the members whose
// keys name ours, and where its params and their _meta lie (carrier.go).

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
	var c Carrier
	c.Object.Start = s.i
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
				start := s.i
				err := s.params(m, &c, depth+1)
				c.Params = Span{start, s.i}
				return err
			}
			c.Unsure = true
		case memberResult, memberError:
			hasResult = true
		}
		return s.value(depth)
	})
	if err != nil {
		return err
	}
	c.Object.End = s.i
	m.carrier = c.pack()
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
// "uri" and "taskId", and where "_meta" lies, and skipping the rest (the
// arguments above all) without decoding it.
func (s *scanner) params(m *Message, c *Carrier, depth int) error {
	return s.object(depth, paramsMembers, func(bit uint8) error {
		var dst *[]byte
		switch bit {
		case memberName:
			dst = &m.Name
		case memberURI:
			dst = &m.URI
		case memberTaskID:
			dst = &m.TaskID
		case memberMeta, memberMetaFolded:
			return s.meta(c, bit, depth)
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
	// Members noted, never decided by (carrier.go): given twice or in
	// another letter case, they make a message unsure where its trace
	// context lies, not ambiguous. Each reaches the object's reader every
	// time it is given.
	memberMeta        uint8 = 1 << 6
	memberMetaFolded  uint8 = 1 << 7 // _meta in another letter case
	memberTraceparent       = memberMeta
	memberTracestate        = memberMetaFolded
	noted                   = memberMeta | memberMetaFolded
)

// member is a key of ours. folded is the bit a key that names it in
// another letter case gets: for a member we decide by, none (0), and the
// scan is ambiguous.
type member struct {
	name   string
	bit    uint8
	folded uint8
}

var (
	jsonrpcMembers = []member{
		{"jsonrpc", memberJSONRPC, 0}, {"method", memberMethod, 0}, {"id", memberID, 0},
		{"params", memberParams, 0}, {"result", memberResult, 0}, {"error", memberError, 0},
	}
	paramsMembers = []member{
		{"name", memberName, 0}, {"uri", memberURI, 0}, {"taskId", memberTaskID, 0},
		{"_meta", memberMeta, memberMetaFolded},
	}
	// metaMembers are read in params._meta; traceparent in another letter
	// case is another member (_meta is read as a map).
	metaMembers = []member{{"traceparent", memberTraceparent, 0}, {"tracestate", memberTracestate, 0}}
)

// memberBit names the member key is, or 0 when it is none of ours. A key
// that is one of ours in another letter case is none of ours, and makes the
// scan ambiguous. Case is folded as encoding/json folds it, Unicode included:
// "paramſ" (with a long s) is params to Go's decoder, though longer in bytes.
// A member only noted (noted) is named in another letter case by its folded
// bit, or by none, and the scan is not ambiguous.
func (s *scanner) memberBit(key []byte, members []member) uint8 {
	for _, mb := range members {
		if string(key) == mb.name {
			return mb.bit
		}
		if bytes.EqualFold(key, []byte(mb.name)) {
			if mb.bit&noted != 0 {
				return mb.folded
			}
			s.ambiguous = true
			return 0
		}
	}
	return 0
}
