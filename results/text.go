package results

import (
	"bytes"
	"unicode/utf8"
)

// Where a text is cut: at a character, never inside one, an escape or a
// surrogate pair, as written in the response (escapes and all).

// fits is how many bytes of the JSON string s (as written, without its
// quotes) fit in n without cutting a character, an escape or a surrogate
// pair in two.
func fits(s []byte, n int) int {
	n = min(n, len(s))
	i := 0
	for i < n {
		w := 1
		switch c := s[i]; {
		case c == '\\':
			w = 2
			if i+1 < len(s) && s[i+1] == 'u' {
				w = 6
				if highSurrogate(s[i:]) && len(s) > i+7 && s[i+6] == '\\' && s[i+7] == 'u' {
					w = 12 // it goes with the escape after it, its low one
				}
			}
		case c >= utf8.RuneSelf:
			if !utf8.FullRune(s[i:]) {
				return i // cut short where the head ends
			}
			_, w = utf8.DecodeRune(s[i:])
		}
		if i+w > n {
			break
		}
		i += w
	}
	return i
}

// highSurrogate reports whether s begins with the \u escape of a high
// surrogate (D800 to DBFF).
func highSurrogate(s []byte) bool {
	return len(s) >= 6 && s[2]|0x20 == 'd' && bytes.IndexByte([]byte("89abAB"), s[3]) >= 0
}
