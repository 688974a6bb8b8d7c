package results

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// unescaper decodes a JSON string's contents, as written (without its
// quotes), given in pieces of any size: its text, as encoding/json
// decodes it (an invalid UTF-8 byte and a lone surrogate are U+FFFD each),
// appended to out.
type unescaper struct {
	out   []byte
	state uint8
	// hex is the \u escape being read, nhex its digits so far; high is a
	// surrogate read, waiting for its pair (0: none).
	hex  rune
	nhex int
	high rune
	raw  [utf8.UTFMax]byte
	nraw int
	err  error
}

// The unescaper's states.
const (
	unPlain  uint8 = iota
	unEscape       // after '\'
	unHex          // in the digits of \u
	unPair         // after a surrogate's escape: its pair's '\' may follow
	unPairU        // after that '\': its 'u' may follow
)

// errEscape: the string is not one JSON reads.
var errEscape = errors.New("not a JSON string")

// Write decodes the next piece.
func (u *unescaper) Write(p []byte) {
	for i := 0; i < len(p) && u.err == nil; i++ {
		if u.state == unPlain && u.nraw == 0 {
			j := i
			for j < len(p) && p[j] >= 0x20 && p[j] < utf8.RuneSelf && p[j] != '\\' && p[j] != '"' {
				j++
			}
			u.out = append(u.out, p[i:j]...)
			if i = j; i == len(p) {
				break
			}
		}
		u.byte(p[i])
	}
}

// byte decodes one byte.
func (u *unescaper) byte(c byte) {
	switch u.state {
	case unEscape:
		u.escaped(c)
	case unHex:
		u.digit(c)
	case unPair:
		u.state = unPlain
		if c == '\\' {
			u.state = unPairU
			return
		}
		u.lone()
		u.byte(c)
	case unPairU:
		u.state = unEscape
		if c == 'u' {
			u.state, u.hex, u.nhex = unHex, 0, 0
			return
		}
		u.lone()
		u.escaped(c)
	default:
		u.plain(c)
	}
}

// plain decodes a byte as written.
func (u *unescaper) plain(c byte) {
	switch {
	case c == '\\' || c < 0x20 || c == '"':
		u.flushRaw()
		if c != '\\' {
			u.err = errEscape
			return
		}
		u.state = unEscape
	case c < utf8.RuneSelf && u.nraw == 0:
		u.out = append(u.out, c)
	default:
		u.raw[u.nraw] = c
		u.nraw++
		for u.nraw > 0 && (utf8.FullRune(u.raw[:u.nraw]) || c < utf8.RuneSelf) {
			u.rawRune()
		}
	}
}

// rawRune decodes the first character of the raw bytes held.
func (u *unescaper) rawRune() {
	r, n := utf8.DecodeRune(u.raw[:u.nraw])
	if r == utf8.RuneError && n == 1 {
		u.out = utf8.AppendRune(u.out, utf8.RuneError)
	} else {
		u.out = append(u.out, u.raw[:n]...)
	}
	u.nraw = copy(u.raw[:], u.raw[n:u.nraw])
}

// flushRaw decodes every raw byte held: what is left of a character cut
// short is U+FFFD a byte.
func (u *unescaper) flushRaw() {
	for u.nraw > 0 {
		u.rawRune()
	}
}

// escaped decodes the byte after a '\'.
func (u *unescaper) escaped(c byte) {
	u.state = unPlain
	switch c {
	case '"', '\\', '/':
		u.out = append(u.out, c)
	case 'b':
		u.out = append(u.out, '\b')
	case 'f':
		u.out = append(u.out, '\f')
	case 'n':
		u.out = append(u.out, '\n')
	case 'r':
		u.out = append(u.out, '\r')
	case 't':
		u.out = append(u.out, '\t')
	case 'u':
		u.state, u.hex, u.nhex = unHex, 0, 0
	default:
		u.err = errEscape
	}
}

// digit reads a hex digit of a \u escape.
func (u *unescaper) digit(c byte) {
	var d byte
	switch {
	case c >= '0' && c <= '9':
		d = c - '0'
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		d = c | 0x20 - 'a' + 10
	default:
		u.err = errEscape
		return
	}
	u.hex = u.hex<<4 | rune(d)
	if u.nhex++; u.nhex < 4 {
		return
	}
	u.state = unPlain
	r := u.hex
	if u.high != 0 {
		if pair := utf16.DecodeRune(u.high, r); pair != utf8.RuneError {
			u.high = 0
			u.out = utf8.AppendRune(u.out, pair)
			return
		}
		u.lone()
	}
	if utf16.IsSurrogate(r) {
		u.high, u.state = r, unPair
		return
	}
	u.out = utf8.AppendRune(u.out, r)
}

// lone decodes a surrogate left without its pair.
func (u *unescaper) lone() {
	u.high = 0
	u.out = utf8.AppendRune(u.out, utf8.RuneError)
}

// End ends the string: it reports errEscape when it ended inside an
// escape.
func (u *unescaper) End() error {
	u.flushRaw()
	switch u.state {
	case unPair:
		u.lone()
		u.state = unPlain
	case unEscape, unHex, unPairU:
		u.err = errEscape
	}
	return u.err
}
