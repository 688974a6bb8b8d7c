package jsonrpc

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
