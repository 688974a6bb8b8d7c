// Package jsonrpc reads JSON-RPC 2.0 messages, and batches of them, from a
// body without decoding what it does not need: it validates the whole body
// as JSON (json.Valid's grammar, plus the NaN and Infinity tokens and the
// leading byte order mark that lenient servers take), learns each message's
// kind, method, id and params.name, and skips everything else, arguments and
// results above all, a word at a time. It refuses what different servers
// could read differently: a member given twice or in another letter case.
//
// It knows nothing of HTTP or MCP beyond the member params.name, which MCP
// uses for the tool or prompt a request names.
package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is what a JSON-RPC message is.
type Kind uint8

const (
	// Invalid: valid JSON that is not a JSON-RPC message: a value that is
	// not an object, or an object whose method is not a string, or without
	// a method and a result or error with an id.
	Invalid Kind = iota
	Request
	Notification
	// Response: a client's answer to a server-to-client request.
	Response
)

// Message is what is learned of one JSON-RPC message. Its byte slices point
// into the body, which is never modified, or hold a decoded copy.
type Message struct {
	Kind Kind
	// Method is the method, unescaped.
	Method []byte
	// ID is the id exactly as sent (a JSON string, number or null); nil when
	// the message has none.
	ID json.RawMessage
	// Name is params.name, unescaped; nil when absent or not a string.
	Name []byte
}

// ErrAmbiguous marks a message that different JSON-RPC servers could read
// differently: a member of ours given twice, or given again under another
// letter case (which case-insensitive decoders such as Go's encoding/json
// would accept). A proxy cannot be sure which method the server behind it
// will run, and should refuse the message instead of guessing.
var ErrAmbiguous = errors.New("ambiguous message")

// SyntaxError is a body that is not JSON.
type SyntaxError struct {
	Offset int
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.msg)
}

// MaxDepth bounds the nesting of arrays and objects, so that a hostile body
// cannot make the scanner recurse without limit.
const MaxDepth = 1000

// ErrTooManyMessages is a batch holding more messages than the caller takes.
var ErrTooManyMessages = errors.New("too many messages in the batch")

// Parse reads a JSON-RPC message or batch from body and appends what
// it learns to msgs, at most max messages: a batch holding more is refused
// with ErrTooManyMessages as soon as its message max+1 begins, before any
// state is kept for it. The rest of it is then left unread. batch reports
// whether body is an array. Errors are those of Each.
func Parse(body []byte, msgs []Message, max int) (_ []Message, batch bool, err error) {
	batch, err = Each(body, func(m Message) error {
		if len(msgs) >= max {
			return ErrTooManyMessages
		}
		msgs = append(msgs, m)
		return nil
	})
	return msgs, batch, err
}

// Each reads a JSON-RPC message or batch from body and calls visit
// with what it learns of each message, in order. (visit takes the message by
// value: a pointer given to a func value would escape, and cost an
// allocation per body.) The whole body is validated as JSON (see scanner);
// arguments and results are skipped, never decoded. An error from visit ends
// the scan and is returned. batch reports whether body is an array.
//
// A body that is not JSON is a *SyntaxError even when it is also ambiguous:
// ErrAmbiguous is reported only for valid JSON.
func Each(body []byte, visit func(Message) error) (batch bool, err error) {
	s := scanner{b: body}
	if bytes.HasPrefix(body, byteOrderMark) {
		// Servers that decode the body as text first (the TypeScript SDK's,
		// Python's json) drop a leading byte order mark.
		s.i = len(byteOrderMark)
	}
	s.ws()
	switch s.peek() {
	case '[':
		batch = true
		s.i++
		s.ws()
		if s.peek() == ']' {
			s.i++
			break
		}
		for {
			s.ws()
			var m Message
			if s.peek() == '{' {
				err = s.message(&m, 2)
			} else {
				err = s.value(1)
			}
			if err != nil {
				return batch, err
			}
			if err = visit(m); err != nil {
				return batch, err
			}
			s.ws()
			if s.peek() == ',' {
				s.i++
				continue
			}
			if err = s.expect(']'); err != nil {
				return batch, err
			}
			break
		}
	case '{':
		var m Message
		if err = s.message(&m, 1); err != nil {
			return false, err
		}
		if err = visit(m); err != nil {
			return false, err
		}
	default:
		if err = s.value(0); err != nil {
			return false, err
		}
		if err = visit(Message{}); err != nil {
			return false, err
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return batch, s.errorf("unexpected data after the message")
	}
	if s.ambiguous {
		return batch, ErrAmbiguous
	}
	return batch, nil
}

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
}

func (s *scanner) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: s.i, msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
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

// params reads the params object at the given depth, learning "name" and
// skipping the rest (the arguments above all) without decoding it.
func (s *scanner) params(m *Message, depth int) error {
	return s.object(depth, paramsMembers, func(bit uint8) error {
		if bit == 0 {
			return s.value(depth)
		}
		if s.peek() == '"' {
			var err error
			m.Name, err = s.str()
			return err
		}
		return s.value(depth)
	})
}

const (
	memberJSONRPC uint8 = 1 << iota
	memberMethod
	memberID
	memberParams
	memberResult
	memberError
	memberName
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
	paramsMembers = []member{{"name", memberName}}
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

// object reads an object, calling member for each of its members with the
// scanner positioned at the value, which member must consume. member gets
// the bit of the member the key names among members, or 0 when the key
// names none of them, or one already seen (which makes the scan
// ambiguous). A nil member skips every member, keys included, without
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
	// keyBuf holds a decoded key, on the stack, since a key goes no further
	// than memberBit; a byte of invalid UTF-8 decodes to three.
	var keyBuf [3 * maxMemberKey]byte
	for {
		s.ws()
		if s.peek() != '"' {
			return s.errorf("want an object key")
		}
		var bit uint8
		var err error
		if member != nil {
			var key []byte
			key, err = s.memberKey(keyBuf[:0])
			bit = s.memberBit(key, members)
			if seen&bit != 0 {
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

// maxMemberKey bounds the raw bytes of an object key that could name one of
// our members: the longest name ("jsonrpc") has 7 characters, and a
// character is at most 12 bytes when written as an escaped surrogate pair.
const maxMemberKey = 7 * 12

// memberKey reads an object key of a message or its params, decoded as
// encoding/json decodes it (into buf when it must be) when it could name one
// of our members, nil when it is too long to. It never allocates: a body of
// millions of escaped keys costs what its bytes cost to scan.
func (s *scanner) memberKey(buf []byte) ([]byte, error) {
	start := s.i
	escaped, err := s.scanStr()
	if err != nil {
		return nil, err
	}
	raw := s.b[start+1 : s.i-1]
	switch {
	case len(raw) > maxMemberKey:
		return nil, nil
	case !escaped && utf8.Valid(raw):
		return raw, nil
	}
	return unquote(buf, raw), nil
}

// unquote appends the content of a valid JSON string, without its quotes,
// decoded as encoding/json decodes it: escapes resolved, a surrogate pair
// joined, and a lone surrogate or a byte of invalid UTF-8 turned into
// U+FFFD.
func unquote(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			i++
			switch raw[i] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i+1:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := utf8.RuneError
					if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
						r2 = hex4(raw[i+3:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default: // '"', '\\', '/'
				dst = append(dst, raw[i])
			}
			i++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r) // RuneError for invalid UTF-8
			i += size
		}
	}
	return dst
}

// hex4 reads the four hex digits of a \u escape the scanner has validated.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// str reads a string and returns its content as encoding/json decodes it.
// Without escapes or invalid UTF-8 (which encoding/json turns into U+FFFD)
// the content is a slice of the body; otherwise it is decoded into a new
// slice.
func (s *scanner) str() ([]byte, error) {
	start := s.i
	escaped, err := s.scanStr()
	if err != nil {
		return nil, err
	}
	if raw := s.b[start+1 : s.i-1]; !escaped && utf8.Valid(raw) {
		return raw, nil
	}
	var out string
	if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
		return nil, s.errorf("invalid string")
	}
	return []byte(out), nil
}

// skipStr reads a string without decoding it.
func (s *scanner) skipStr() error {
	_, err := s.scanStr()
	return err
}

// scanStr validates the string at s.i, quotes included, and reports whether
// it holds escapes.
func (s *scanner) scanStr() (escaped bool, err error) {
	s.i++ // opening quote
	for {
		// Most bytes are plain: skip them eight at a time, then one by one.
		i := skipPlain(s.b, s.i)
		s.i = i
		switch {
		case i >= len(s.b):
			return escaped, s.errorf("unterminated string")
		case s.b[i] == '"':
			s.i++
			return escaped, nil
		case s.b[i] == '\\':
			escaped = true
			if err := s.escape(); err != nil {
				return escaped, err
			}
		default:
			return escaped, s.errorf("control character in string")
		}
	}
}

// skipPlain returns the index of the first byte at or after i that does not
// stand for itself in a JSON string: a quote, a backslash or a control
// character; len(b) if there is none.
func skipPlain(b []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		// A byte of w is flagged when it is below 0x20, or equal to '"'
		// or '\\' (each test: the classic "has a zero byte" trick; bytes of
		// 0x80 and above never flag the control test, because of the &^w).
		// The lowest flagged byte is exact: no borrow reaches it.
		ctl := (w - 0x20*ones) &^ w
		quote := w ^ ('"' * ones)
		backslash := w ^ ('\\' * ones)
		if m := (ctl | ((quote - ones) &^ quote) | ((backslash - ones) &^ backslash)) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// plain marks the bytes that stand for themselves inside a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escape validates one escape sequence at s.i.
func (s *scanner) escape() error {
	s.i++ // backslash
	switch s.peek() {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return nil
	case 'u':
		s.i++
		for range 4 {
			c := s.peek()
			if !isDigit(c) && (c|0x20 < 'a' || c|0x20 > 'f') {
				return s.errorf("invalid \\u escape")
			}
			s.i++
		}
		return nil
	}
	return s.errorf("invalid escape")
}
