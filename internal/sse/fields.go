package sse

import "bytes"

// What the SSE specification makes of the values of the fields it names,
// beyond data and event: clients read them so.

// IgnoredID reports whether an id field's value is one clients ignore:
// one that holds a NUL.
func IgnoredID(value []byte) bool { return bytes.IndexByte(value, 0) >= 0 }

// Retry reads a retry field's value: a time in milliseconds, in ASCII
// digits only; ok is false for any other value, which clients ignore, and
// for one of more than nine digits, which no stream means.
func Retry(value []byte) (ms int, ok bool) {
	if len(value) == 0 || len(value) > 9 {
		return 0, false
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int(c-'0')
	}
	return ms, true
}
