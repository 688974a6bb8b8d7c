package jsonrpc

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// maxMemberKey bounds the raw bytes of an object key that could name one of
// our members: the longest name ("traceparent") has 11 characters, and a
// character is at most 12 bytes when written as an escaped surrogate pair.
const maxMemberKey = 11 * 12

// keyBit reads an object key of a message, its params or their _meta,
// and names the member it is among members (memberBit), decoded as
// encoding/json decodes it when it could name one of ours. It never
// allocates: a body of millions of escaped keys costs what its bytes cost
// to scan.
func (s *scanner) keyBit(members []member) (uint8, error) {
	start := s.i
	escaped, err := s.scanStr()
	if err != nil {
		return 0, err
	}
	raw := s.b[start+1 : s.i-1]
	switch {
	case len(raw) > maxMemberKey:
		return 0, nil // too long to name one of ours
	case !escaped && utf8.Valid(raw):
		return s.memberBit(raw, members), nil
	}
	return s.decodedKeyBit(raw, members), nil
}

// decodedKeyBit is keyBit for a key that must be decoded: on the stack
// here, where a key goes no further than memberBit, rather than in every
// object read. A byte of invalid UTF-8 decodes to three.
func (s *scanner) decodedKeyBit(raw []byte, members []member) uint8 {
	var buf [3 * maxMemberKey]byte
	return s.memberBit(unquote(buf[:0], raw), members)
}

// AppendUnquoted appends the content of a valid JSON string (raw, without
// its quotes, its escapes well formed), decoded as encoding/json decodes
// it: escapes resolved, a surrogate pair joined, and a lone surrogate or a
// byte of invalid UTF-8 turned into U+FFFD.
func AppendUnquoted(dst, raw []byte) []byte { return unquote(dst, raw) }

// SkipPlain returns the index of the first byte at or after i that does not
// stand for itself in a JSON string (a quote, a backslash or a control
// character), len(b) if there is none, eight bytes at a time.
func SkipPlain(b []byte, i int) int { return skipPlain(b, i) }

// unquote is AppendUnquoted.
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
			if s.more() {
				continue
			}
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
