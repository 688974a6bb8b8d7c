package jsonrpc

import (
	"errors"
	"unicode/utf8"
)

// Skimming a message too large to hold. A reader that cannot keep a
// message whole must still answer for it: an error in its place, for its
// id. The Skimmer learns what that takes (the message's kind and id) from
// bytes that pass through it once, in pieces, and are not kept.

// ErrIDTooLong is a skimmed message whose id is longer than the skimmer
// keeps.
var ErrIDTooLong = errors.New("the id is longer than the reader keeps")

// Skimmer reads the top level of one JSON-RPC message given in pieces
// (Write), keeping what Each would learn of its kind and its id, and no
// more of it than an object key that could name a member of ours, the id
// (at most maxID bytes), and one byte per level of nesting: its memory is
// bounded whatever the message's size. It reads the top-level object's
// members as the scanner does (a member of ours given twice or in another
// letter case makes the message ambiguous) and checks the structure of
// what it skips (brackets, strings and their escapes), not its scalars: it
// tells what a message is, to answer for it, never that it may be passed
// on.
type Skimmer struct {
	maxID int
	state skimState
	// open holds the bracket of each value open around the position, the
	// top level's first.
	open []byte
	// read counts the bytes of the pieces before the current one.
	read int
	// bom counts the bytes of a leading byte order mark read so far.
	bom int
	// In a string: escape says a backslash was just read, hex counts the
	// digits of a \u escape still to come.
	escape bool
	hex    int
	// key is the raw key of a top-level member being read; id is the
	// member id's value, as written.
	key, id            span
	bit, seen          uint8
	hasMethod, hasID   bool
	methodIsString     bool
	hasResult, message bool
	ambiguous          bool
	err                error
}

type skimState uint8

const (
	skimBefore      skimState = iota // before the value: whitespace, a byte order mark first
	skimKeyFirst                     // after the message's '{': a key or '}'
	skimKeyNext                      // after a member's ',': a key
	skimKey                          // in a key of the message's
	skimColon                        // after that key
	skimMember                       // before a member's value
	skimAfterMember                  // after it: ',' or '}'
	skimString                       // in a string value
	skimScalar                       // in a number or a literal
	skimNested                       // in an array, or in an object below the message's level
	skimAfter                        // after the value: whitespace only
)

// span keeps the bytes of one token as its pieces pass, up to max: from
// marks where it starts in the current piece.
type span struct {
	b    []byte
	long bool
	on   bool
	from int
}

func (s *span) start(i int) { s.b, s.long, s.on, s.from = s.b[:0], false, true, i }

// stop keeps the token's bytes up to i in p, its last piece.
func (s *span) stop(p []byte, i, max int) {
	s.keep(p[s.from:i], max)
	s.on = false
}

// flush keeps the rest of p, when the token goes on in the next piece.
func (s *span) flush(p []byte, max int) {
	if s.on {
		s.keep(p[s.from:], max)
		s.from = 0
	}
}

func (s *span) keep(b []byte, max int) {
	if s.long || len(s.b)+len(b) > max {
		s.long = true
		return
	}
	s.b = append(s.b, b...)
}

// NewSkimmer returns a skimmer that keeps ids of at most maxID bytes.
func NewSkimmer(maxID int) *Skimmer {
	return &Skimmer{maxID: maxID}
}

// Write reads the next piece of the message. After an error, pieces are
// not read.
func (k *Skimmer) Write(p []byte) {
	for i := 0; i < len(p) && k.err == nil; {
		i = k.step(p, i)
	}
	k.key.flush(p, maxMemberKey)
	k.id.flush(p, k.maxID)
	k.read += len(p)
}

// step reads from p[i], and returns where to read on.
func (k *Skimmer) step(p []byte, i int) int {
	c := p[i]
	switch k.state {
	case skimString, skimKey:
		return k.inString(p, i)
	case skimScalar:
		if scalarByte(c) {
			return i + 1
		}
		k.valueEnd(p, i)
		return i // the byte that ended it is read in the next state
	}
	if space[c] && (k.state != skimBefore || k.bom == 0 || k.bom == len(byteOrderMark)) {
		return i + 1
	}
	switch k.state {
	case skimBefore:
		return k.before(p, i)
	case skimKeyFirst, skimKeyNext:
		switch {
		case c == '"':
			k.state = skimKey
			k.key.start(i + 1)
			return i + 1
		case c == '}' && k.state == skimKeyFirst:
			k.open = k.open[:0]
			k.state = skimAfter
			return i + 1
		}
		return k.fail(i, "want an object key")
	case skimColon:
		if c != ':' {
			return k.fail(i, "want ':'")
		}
		k.state = skimMember
		return i + 1
	case skimMember:
		k.member(c, i)
		return k.value(p, i)
	case skimAfterMember:
		switch c {
		case ',':
			k.state = skimKeyNext
			return i + 1
		case '}':
			k.open = k.open[:0]
			k.state = skimAfter
			return i + 1
		}
		return k.fail(i, "want ',' or '}'")
	case skimNested:
		return k.nested(p, i)
	}
	return k.fail(i, "unexpected data after the message")
}

// before reads p[i] before the message: a byte of a leading byte order
// mark, or the first of the message.
func (k *Skimmer) before(p []byte, i int) int {
	c := p[i]
	if pos := k.read + i; pos == k.bom && pos < len(byteOrderMark) && c == byteOrderMark[pos] {
		k.bom++
		return i + 1
	}
	if k.bom > 0 && k.bom < len(byteOrderMark) {
		return k.fail(i, "invalid byte order mark")
	}
	k.message = c == '{'
	return k.value(p, i)
}

// value starts the value at p[i].
func (k *Skimmer) value(p []byte, i int) int {
	switch c := p[i]; {
	case c == '{' || c == '[':
		return k.push(p, i)
	case c == '"':
		k.state = skimString
		return i + 1
	case scalarByte(c):
		k.state = skimScalar
		return i + 1
	}
	return k.fail(i, "unexpected %q", p[i])
}

// push opens the object or array at p[i].
func (k *Skimmer) push(p []byte, i int) int {
	if len(k.open) >= MaxDepth {
		return k.fail(i, "nesting deeper than %d", MaxDepth)
	}
	k.open = append(k.open, p[i])
	k.state = skimNested
	if len(k.open) == 1 && p[i] == '{' {
		k.state = skimKeyFirst
	}
	return i + 1
}

// nested reads inside an array, or an object below the message's level:
// strings and brackets, the rest skipped.
func (k *Skimmer) nested(p []byte, i int) int {
	switch c := p[i]; c {
	case '"':
		k.state = skimString
		return i + 1
	case '{', '[':
		return k.push(p, i)
	case '}', ']':
		if open := k.open[len(k.open)-1]; open+2 != c { // '{'+2 is '}', '['+2 is ']'
			return k.fail(i, "unexpected %q", c)
		}
		k.open = k.open[:len(k.open)-1]
		if k.atMember() || len(k.open) == 0 {
			k.valueEnd(p, i+1)
		}
		return i + 1
	case ',', ':':
		return i + 1
	}
	if !scalarByte(p[i]) {
		return k.fail(i, "unexpected %q", p[i])
	}
	return i + 1
}

// inString reads inside a string, plain bytes eight at a time.
func (k *Skimmer) inString(p []byte, i int) int {
	switch {
	case k.escape:
		k.escape = false
		switch p[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			k.hex = 4
		default:
			return k.fail(i, "invalid escape")
		}
		return i + 1
	case k.hex > 0:
		if c := p[i]; !isDigit(c) && (c|0x20 < 'a' || c|0x20 > 'f') {
			return k.fail(i, "invalid \\u escape")
		}
		k.hex--
		return i + 1
	}
	j := skipPlain(p, i)
	switch {
	case j == len(p):
		return j
	case p[j] == '\\':
		k.escape = true
		return j + 1
	case p[j] != '"':
		return k.fail(j, "control character in string")
	}
	if k.state == skimKey {
		k.key.stop(p, j, maxMemberKey)
		k.keyRead()
		k.state = skimColon
		return j + 1
	}
	if k.atMember() || len(k.open) == 0 {
		k.valueEnd(p, j+1)
		return j + 1
	}
	k.state = skimNested
	return j + 1
}

// atMember reports whether the position is at the level of the message's
// members.
func (k *Skimmer) atMember() bool {
	return len(k.open) == 1 && k.open[0] == '{'
}

// keyRead names the member whose key was just read, as the scanner does.
func (k *Skimmer) keyRead() {
	k.bit = 0
	if k.key.long {
		return // too long to name one of ours
	}
	key := k.key.b
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf {
			var buf [3 * maxMemberKey]byte
			key = unquote(buf[:0], key)
			break
		}
	}
	var s scanner
	k.bit = s.memberBit(key, jsonrpcMembers)
	k.ambiguous = k.ambiguous || s.ambiguous
	if k.seen&k.bit != 0 {
		k.ambiguous = true // given twice
		k.bit = 0
	}
	k.seen |= k.bit
}

// member notes what the member whose value starts with c is.
func (k *Skimmer) member(c byte, i int) {
	switch k.bit {
	case memberMethod:
		k.hasMethod, k.methodIsString = true, c == '"'
	case memberID:
		k.hasID = true
		k.id.start(i)
	case memberResult, memberError:
		k.hasResult = true
	}
}

// valueEnd ends a value at i in p: a member's, or the whole message's.
func (k *Skimmer) valueEnd(p []byte, i int) {
	if k.id.on {
		k.id.stop(p, i, k.maxID)
	}
	k.state = skimAfter
	if k.atMember() {
		k.state = skimAfterMember
	}
}

func (k *Skimmer) fail(i int, format string, args ...any) int {
	s := scanner{i: k.read + i}
	k.err = s.errorf(format, args...)
	return i + 1
}

// scalarByte reports whether c may be part of a number or a literal.
func scalarByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// Message is what the message is, once all of it was written: its Kind and
// ID as Each reads them. The error is a *SyntaxError for a message that
// ended early or broke the structure the skimmer reads, ErrAmbiguous, or
// ErrIDTooLong.
func (k *Skimmer) Message() (Message, error) {
	switch {
	case k.err != nil:
		return Message{}, k.err
	case k.state == skimScalar && len(k.open) == 0:
		// A bare number or literal ends with the input.
	case k.state != skimAfter:
		s := scanner{i: k.read}
		return Message{}, s.errorf("unexpected end of input")
	case k.ambiguous:
		return Message{}, ErrAmbiguous
	}
	var m Message
	if !k.message {
		return m, nil
	}
	if k.hasID {
		if k.id.long {
			return Message{}, ErrIDTooLong
		}
		s := scanner{b: k.id.b}
		if err := s.value(1); err != nil || s.i != len(s.b) {
			s.i = 0
			return Message{}, s.errorf("invalid id")
		}
		m.ID = k.id.b
	}
	switch {
	case k.hasMethod && !k.methodIsString:
	case k.hasMethod && m.ID != nil:
		m.Kind = Request
	case k.hasMethod:
		m.Kind = Notification
	case k.hasResult && m.ID != nil:
		m.Kind = Response
	}
	return m, nil
}
