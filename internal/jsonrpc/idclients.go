package jsonrpc

import (
	"bytes"
	"math"
	"math/big"
	"unicode"
	"unicode/utf8"
)

// How the TypeScript and Python SDKs read an id written back (see id.go):
// JavaScript's Number of a string, and Python's int() of one.

// appendJSNumber appends Number(id) as the TypeScript SDK reads a
// response's id: a number must be an integer (its schema refuses others),
// a string is read by JavaScript's Number (NaN matches nothing).
func appendJSNumber(dst, id []byte, isString, isNumber bool) ([]byte, bool) {
	f, ok := 0.0, false
	switch {
	case isNumber:
		f, ok = parseNumber(id)
		ok = ok && !math.IsInf(f, 0) && f == math.Trunc(f)
	case isString:
		if text, valid := stringText(id); valid {
			f, ok = jsNumber(text)
		}
	}
	if !ok {
		return dst, false
	}
	return appendFloat(dst, f), true
}

// jsNumber is JavaScript's Number(s) of a string (StringToNumber), ok false
// for NaN. Only a string shaped as a number is converted, so that reading
// an id that is none allocates nothing.
func jsNumber(s []byte) (float64, bool) {
	s = bytes.TrimFunc(s, isJSSpace)
	switch string(s) {
	case "":
		return 0, true
	case "Infinity", "+Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	if base := radix(s); base != 0 {
		n, ok := new(big.Int).SetString(string(s[2:]), base)
		if !ok {
			return 0, false
		}
		f, _ := new(big.Float).SetInt(n).Float64()
		return f, true
	}
	if !isJSDecimal(s) {
		return 0, false
	}
	return parseNumber(s)
}

// radix is the base a 0x, 0o or 0b literal is written in, when s is one
// with digits of that base (and nothing else: no sign, no separator), 0
// otherwise.
func radix(s []byte) int {
	if len(s) < 3 || s[0] != '0' {
		return 0
	}
	base := 0
	switch s[1] {
	case 'x', 'X':
		base = 16
	case 'o', 'O':
		base = 8
	case 'b', 'B':
		base = 2
	}
	for _, c := range s[2:] {
		v := 99
		switch {
		case isDigit(c):
			v = int(c - '0')
		case c >= 'a' && c <= 'f':
			v = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			v = int(c-'A') + 10
		}
		if v >= base {
			return 0
		}
	}
	return base
}

// isJSDecimal reports whether s is a StrDecimalLiteral: a sign, digits
// with at most one point (at least one digit), and an exponent.
func isJSDecimal(s []byte) bool {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	mantissa, exp, hasExp := bytes.Cut(s, []byte("e"))
	if !hasExp {
		mantissa, exp, hasExp = bytes.Cut(s, []byte("E"))
	}
	whole, frac, _ := bytes.Cut(mantissa, []byte("."))
	if len(whole)+len(frac) == 0 || !allDigits(whole) || !allDigits(frac) {
		return false
	}
	if !hasExp {
		return true
	}
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	return len(exp) > 0 && allDigits(exp)
}

func allDigits(s []byte) bool {
	for _, c := range s {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// isJSSpace is JavaScript's white space and line terminators, which
// Number trims.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00a0', '\u1680', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff':
		return true
	}
	return r >= '\u2000' && r <= '\u200a'
}

// appendIntegral appends a number's integer, as the Python SDK's schema
// reads an id (an integer, or a float with no fraction), in decimal.
func appendIntegral(dst, id []byte) ([]byte, bool) {
	if !bytes.ContainsAny(id, ".eE") {
		n, ok := new(big.Int).SetString(string(id), 10)
		if !ok {
			return dst, false
		}
		return n.Append(dst, 10), true
	}
	f, ok := parseNumber(id)
	if !ok || math.IsInf(f, 0) || f != math.Trunc(f) {
		return dst, false
	}
	n, _ := big.NewFloat(f).Int(nil)
	return n.Append(dst, 10), true
}

// appendPythonInt appends the integer Python's int() reads in a string
// id, in decimal: white space around, a sign, decimal digits of any
// script, single underscores between them.
func appendPythonInt(dst, id []byte) ([]byte, bool) {
	text, ok := stringText(id)
	if !ok {
		return dst, false
	}
	text = bytes.TrimFunc(text, isPythonSpace)
	neg := false
	if len(text) > 0 && (text[0] == '+' || text[0] == '-') {
		neg, text = text[0] == '-', text[1:]
	}
	if !isPythonDigits(text) {
		return dst, false
	}
	digits := make([]byte, 0, len(text))
	for _, r := range string(text) {
		if r != '_' {
			digits = append(digits, byte('0'+digitValue(r)))
		}
	}
	n, _ := new(big.Int).SetString(string(digits), 10)
	if neg {
		n.Neg(n)
	}
	return n.Append(dst, 10), true
}

// isPythonDigits reports whether s is what int() reads as an integer once
// white space and sign are off: decimal digits of any script, with single
// underscores between them.
func isPythonDigits(s []byte) bool {
	underscore := true // none may come first
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		i += n
		switch {
		case r == '_' && !underscore:
			underscore = true
		case r <= '9' && r >= '0', r > 0x7f && unicode.Is(unicode.Nd, r):
			underscore = false
		default:
			return false
		}
	}
	return len(s) > 0 && !underscore
}

// isPythonSpace is what Python's str.strip() removes: Unicode's white
// space, and the four separators of ASCII.
func isPythonSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= '\x1c' && r <= '\x1f')
}

// digitValue is the value of a decimal digit of any script: Unicode gives
// each script's digits as runs of ten consecutive code points, from zero
// (a run of several sets of ten, as the mathematical digits are, still
// starts at a zero).
func digitValue(r rune) int {
	if r <= '9' {
		return int(r - '0')
	}
	start := r
	for unicode.Is(unicode.Nd, start-1) {
		start--
	}
	return int(r-start) % 10
}
