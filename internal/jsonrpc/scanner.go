package jsonrpc

import (
	"bytes"
	"fmt"
)

// scanner is a validating JSON reader over one body, in the manner of
// encoding/json's Valid: the same grammar, no decoding of what it skips, with
// one extension. It also takes the tokens NaN, Infinity and -Infinity as
// numbers, as Python's JSON parsers do (json.loads, and pydantic_core, which
// the official Python SDK server reads requests with): a body holding them is
// then read as that server reads it, instead of being left uninspected.
type scanner struct {
	b []byte
	i int
	// ambiguous records that a message was found ambiguous; the scan goes
	// on, so that a body that is not JSON is reported as such.
	ambiguous bool
	// key is where the key of the member being read begins, in an object
	// read for its members.
	key int

	// Reading a body as it arrives (ParseStream): src gives the bytes
	// received so far, of which b holds those the scan may read; open says
	// whether the scan is inside the top-level value; head, until it
	// reports it has what it needs, is shown a single message's members as
	// params is read.
	src      Source
	received []byte
	open     bool
	head     func(Message) bool
	// lookedBack counts the bytes more looked at to find where b may end,
	// which tests hold to the body's length.
	lookedBack int
}

// more extends b with the bytes that arrived since the scan reached its
// end, and reports whether there are any: false at the end of the body, and
// always when the whole body was given at once. Until the body ends, b
// stops before a byte received that is neither whitespace nor a digit: ws
// and digits, which stop at the end of b, then stop where they would have
// stopped on the whole body, and stay small enough to be inlined.
func (s *scanner) more() bool {
	for s.src != nil {
		received, ok := s.src.More(s.i, s.open)
		if !ok {
			s.src = nil
			break
		}
		// b ends before a byte that ends any run. Only the bytes new since
		// the last call are looked at: those received before, after the
		// byte b stops before, are all whitespace or digits. (Looking back
		// further would make a long run of digits arriving in small pieces
		// cost the square of its length.)
		from := max(len(s.b), len(s.received))
		s.received = received
		k := len(received) - 1
		for k >= from && (space[received[k]] || isDigit(received[k])) {
			k--
		}
		s.lookedBack += len(received) - 1 - k
		if k >= from && k > len(s.b) {
			s.b = received[:k]
			return true
		}
	}
	if len(s.received) > len(s.b) {
		s.b = s.received
		return true
	}
	return false
}

// need makes n bytes from s.i readable, when the body has as many.
func (s *scanner) need(n int) {
	for len(s.b)-s.i < n && s.src != nil && s.more() {
	}
}

func (s *scanner) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: s.i, msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return s.peekMore()
}

// peekMore is peek at the end of what has arrived, out of line so that
// peek stays inlined.
//
//go:noinline
func (s *scanner) peekMore() byte {
	if s.more() {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) ws() {
	i := s.i
	for i < len(s.b) && space[s.b[i]] {
		i++
	}
	s.i = i
}

// space marks JSON's whitespace.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.i >= len(s.b) {
			return s.errorf("unexpected end of input, want %q", c)
		}
		return s.errorf("unexpected %q, want %q", s.b[s.i], c)
	}
	s.i++
	return nil
}

// object reads an object, calling member for each of its members with the
// scanner positioned at the value, which member must consume. member gets
// the bit of the member the key names among members, or 0 when the key
// names none of them, or one already seen (which makes the scan
// ambiguous, but for a member only noted, which is given again). A nil member skips every member, keys included, without
// decoding them.
func (s *scanner) object(depth int, members []member, member func(bit uint8) error) error {
	if depth > MaxDepth {
		return s.errorf("nesting deeper than %d", MaxDepth)
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	s.ws()
	if s.peek() == '}' {
		s.i++
		return nil
	}
	var seen uint8
	for {
		s.ws()
		if s.peek() != '"' {
			return s.errorf("want an object key")
		}
		var bit uint8
		var err error
		if member != nil {
			s.key = s.i
			bit, err = s.keyBit(members)
			if seen&bit&^noted != 0 {
				s.ambiguous = true // given twice
				bit = 0
			}
			seen |= bit
		} else {
			err = s.skipStr()
		}
		if err != nil {
			return err
		}
		s.ws()
		if err := s.expect(':'); err != nil {
			return err
		}
		s.ws()
		if member == nil {
			err = s.value(depth)
		} else {
			err = member(bit)
		}
		if err != nil {
			return err
		}
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		return s.expect('}')
	}
}

// value skips any JSON value, validating it.
func (s *scanner) value(depth int) error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(depth+1, nil, nil)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.skipStr()
	case c == '-' || (c >= '0' && c <= '9'):
		if c == '-' && len(s.b)-s.i < len(minusInfinity) {
			s.need(len(minusInfinity))
		}
		if bytes.HasPrefix(s.b[s.i:], minusInfinity) {
			s.i += len(minusInfinity)
			return nil
		}
		return s.number()
	case c == 'N':
		return s.literal("NaN")
	case c == 'I':
		return s.literal("Infinity")
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case s.i >= len(s.b):
		return s.errorf("unexpected end of input")
	default:
		return s.errorf("unexpected %q", c)
	}
}

func (s *scanner) array(depth int) error {
	if depth > MaxDepth {
		return s.errorf("nesting deeper than %d", MaxDepth)
	}
	s.i++ // '['
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if err := s.value(depth); err != nil {
			return err
		}
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		return s.expect(']')
	}
}

var (
	minusInfinity = []byte("-Infinity")
	byteOrderMark = []byte("\xef\xbb\xbf")
)

// IsNonFinite reports whether a value the scanner read is one of the tokens
// NaN, Infinity or -Infinity, which are not JSON.
func IsNonFinite(v []byte) bool {
	return len(v) > 0 && (v[0] == 'N' || v[0] == 'I' || bytes.HasPrefix(v, minusInfinity))
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) {
		s.need(len(lit))
	}
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.errorf("invalid literal")
	}
	s.i += len(lit)
	return nil
}

func (s *scanner) number() error {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return s.errorf("invalid number")
	}
	if s.peek() == '.' {
		s.i++
		if !isDigit(s.peek()) {
			return s.errorf("invalid number")
		}
		s.digits()
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !isDigit(s.peek()) {
			return s.errorf("invalid number")
		}
		s.digits()
	}
	if s.i == start {
		return s.errorf("invalid number")
	}
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) digits() {
	i := s.i
	for i < len(s.b) && isDigit(s.b[i]) {
		i++
	}
	s.i = i
}
