package jsonrpc

import "math"

// Where trace context goes. A proxy that gives each message trace context
// of its own in params._meta (SEP-414: traceparent, tracestate) edits the
// body by splicing bytes; the Carrier says where, read in the one pass
// that learns the rest, so that the body is not read again for it.

// Carrier is where a message's params, their _meta, and its traceparent
// and tracestate lie in the body: offsets into the body given to Parse (a
// leading byte order mark counted), a Span zero where the member is
// absent.
type Carrier struct {
	// Object is the message's own braces, from '{' to past '}'.
	Object Span
	// Params is the params object, zero when the message has none.
	Params Span
	// Meta is the params._meta object, zero when params has none.
	Meta Span
	// Traceparent and Tracestate are those members of _meta, zero when
	// absent.
	Traceparent, Tracestate MetaMember
	// Unsure: which context a server would read cannot be told, and the
	// message is better left as it is. params or _meta is not an object,
	// or _meta is given twice or in another letter case (which Go's
	// decoder takes for it), or traceparent or tracestate is given twice.
	// None of these makes the message ambiguous: they are not members
	// the gateway decides by.
	Unsure bool
}

// Span is where a value lies: from Start to End, past its last byte.
type Span struct{ Start, End int }

// MetaMember is a member of _meta as written: its key's opening quote at
// Start, its value from Value to End.
type MetaMember struct{ Start, Value, End int }

// meta reads a member of params that names _meta, in the letter case bit
// says, at the given depth.
func (s *scanner) meta(c *Carrier, bit uint8, depth int) error {
	if bit != memberMeta || c.Meta.End != 0 || s.peek() != '{' {
		c.Unsure = true
	}
	if bit != memberMeta || s.peek() != '{' {
		return s.value(depth)
	}
	start := s.i
	err := s.object(depth+1, metaMembers, func(bit uint8) error {
		var into *MetaMember
		switch bit {
		case memberTraceparent:
			into = &c.Traceparent
		case memberTracestate:
			into = &c.Tracestate
		default:
			return s.value(depth + 1)
		}
		if into.End != 0 {
			c.Unsure = true // given twice
		}
		*into = MetaMember{Start: s.key, Value: s.i}
		err := s.value(depth + 1)
		into.End = s.i
		return err
	})
	c.Meta = Span{start, s.i}
	return err
}

// packedCarrier is a Carrier as a message keeps it, in half the room: a
// message is kept for every request, traced or not. A Carrier whose
// offsets do not fit (a body over 2 GiB) is kept as unsure.
type packedCarrier struct {
	object, params, meta    [2]int32
	traceparent, tracestate [3]int32
	unsure                  bool
}

func (c Carrier) pack() packedCarrier {
	if c.Object.End > math.MaxInt32 {
		return packedCarrier{unsure: true}
	}
	span := func(s Span) [2]int32 { return [2]int32{int32(s.Start), int32(s.End)} }
	member := func(m MetaMember) [3]int32 { return [3]int32{int32(m.Start), int32(m.Value), int32(m.End)} }
	return packedCarrier{
		object: span(c.Object), params: span(c.Params), meta: span(c.Meta),
		traceparent: member(c.Traceparent), tracestate: member(c.Tracestate), unsure: c.Unsure,
	}
}

// Carrier is where m's params and params._meta lie in the body.
func (m *Message) Carrier() Carrier {
	p := &m.carrier
	span := func(s [2]int32) Span { return Span{int(s[0]), int(s[1])} }
	member := func(m [3]int32) MetaMember { return MetaMember{int(m[0]), int(m[1]), int(m[2])} }
	return Carrier{
		Object: span(p.object), Params: span(p.params), Meta: span(p.meta),
		Traceparent: member(p.traceparent), Tracestate: member(p.tracestate), Unsure: p.unsure,
	}
}
