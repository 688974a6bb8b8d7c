package jsonrpc

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A response may answer a request when any official client would take it
// for its response: each case names the client whose matching it follows.
func TestAResponseMayAnswerARequestAsAnyClientMatchesIt(t *testing.T) {
	cases := []struct {
		request, response string
		want              bool
		why               string
	}{
		{`1`, `1`, true, "the same bytes"},
		{`1`, `1.0`, true, "the same value (every reader)"},
		{`1`, `1e0`, true, "the same value (every reader)"},
		{`100`, `1E2`, true, "the same value (every reader)"},
		{`0`, `-0`, true, "the same value (every reader)"},
		{`9007199254740993`, `9007199254740992`, true, "one float64 (JavaScript reads both so)"},
		{`"café"`, `"caf\u00e9"`, true, "the same text (every reader)"},
		{`"a"`, `"a"`, true, "the same bytes"},
		{`1`, `"1"`, true, `Number("1") (TypeScript), int("1") (Python)`},
		{`1`, `" 1 "`, true, `Number(" 1 ") (TypeScript), int(" 1 ") (Python)`},
		{`1`, `"0x1"`, true, `Number("0x1") (TypeScript)`},
		{`1`, `"1e0"`, true, `Number("1e0") (TypeScript)`},
		{`1`, `"+1"`, true, `Number("+1") (TypeScript)`},
		{`1`, `"1."`, true, `Number("1.") (TypeScript)`},
		{`0`, `""`, true, `Number("") is 0 (TypeScript)`},
		{`10`, `"1_0"`, true, `int("1_0") (Python)`},
		{`3`, `"٣"`, true, `int("٣") (Python reads every script's digits)`},
		{`15`, `"𝟏𝟓"`, true, `int of mathematical digits (Python)`},
		{`1`, `1.5`, true, "int64(1.5) (Go)"},
		{`-1`, `-1.9`, true, "int64(-1.9) (Go)"},
		{`"1"`, `1`, true, "a string request, a number response: Number (TypeScript)"},
		{`1`, `2`, false, "another value"},
		{`1`, `"one"`, false, "no reader reads it as 1"},
		{`1`, `"1_"`, false, "no reader reads it as 1"},
		{`1`, `"0x1_0"`, false, "Number refuses separators"},
		{`16`, `"-0x10"`, false, "Number refuses a signed hex"},
		{`1`, `"1.5"`, false, "Number reads 1.5; Python's int refuses it"},
		{`2`, `1.5`, false, "int64(1.5) is 1"},
		{`1`, `null`, false, "no id"},
		{`1`, `true`, false, "no id"},
		{`"a"`, `"b"`, false, "another text"},
		{`1`, ``, false, "nothing"},
		{`1`, `"`, false, "broken"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, MayAnswer([]byte(c.request), []byte(c.response)), "%s answering %s: %s", c.response, c.request, c.why)
		assert.Equal(t, c.want, MayAnswer([]byte(c.response), []byte(c.request)), "%s answering %s: the relation is symmetric", c.request, c.response)
	}
}

// What Number reads in a string, as JavaScript does.
func TestJSNumberReadsAsJavaScriptDoes(t *testing.T) {
	cases := map[string]float64{
		"": 0, " ": 0, "\n\t": 0, "42": 42, " 42 ": 42, "\u00a042\ufeff": 42, "0x1F": 31, "0o17": 15, "0b101": 5,
		"1e3": 1000, ".5": 0.5, "5.": 5, "-2.5": -2.5, "+7": 7, "007": 7,
	}
	for s, want := range cases {
		got, ok := jsNumber([]byte(s))
		assert.True(t, ok, "%q", s)
		assert.Equal(t, want, got, "%q", s)
	}
	for _, s := range []string{"abc", "1a", "0x", "0xg", "1_000", "1e", "e1", ".", "+", "--1", "0x-1", "Infinityx", "inf", "NaN", "1 2"} {
		_, ok := jsNumber([]byte(s))
		assert.False(t, ok, "%q is NaN", s)
	}
}

// Any id reads as itself, and no id makes the reading panic or grow past
// a bound that follows its length.
func FuzzReadID(f *testing.F) {
	for _, seed := range []string{`1`, `1.0`, `"1"`, `"0x1"`, `"١٢"`, `-0`, `1e400`, `"\u0031"`, `null`, `"`, `1e-400`, `123456789012345678901234567890`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, id []byte) {
		if len(id) > 6*256+2 {
			return
		}
		keys := ReadID(nil, id)
		n := 0
		for key := range keys.All {
			n += len(key)
		}
		assert.LessOrEqual(t, n, 4*(len(id)+16)+4*len(id), "keys of %q", id)
		if len(id) > 0 && json.Valid(id) {
			assert.True(t, MayAnswer(id, id), "%q answers itself", id)
		}
	})
}
