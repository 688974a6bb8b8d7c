package feature

import (
	"strconv"
	"unicode/utf8"
)

// MaxEchoed bounds, in bytes, a client-chosen value (a method, a tool name,
// an id, a header, a key) a feature writes into a log line or an envelope.
const MaxEchoed = 256

// Clip returns s cut to MaxEchoed bytes at a character boundary, saying
// how long it was.
func Clip(s string) string {
	if len(s) <= MaxEchoed {
		return s
	}
	cut := MaxEchoed
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
