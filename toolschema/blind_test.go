package toolschema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo is the bench responder's schema: it reads no string's content.
const echo = `{"type":"object","properties":{"text":{"type":"string","description":"the text to echo back"}},"required":["text"],"additionalProperties":false}`

func TestBlindOnlyWhereNoKeywordReadsAString(t *testing.T) {
	for schema, blind := range map[string]bool{
		echo: true,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":["string","integer"],"minimum":3}}},"minProperties":1}`: true,
		`{"type":"object","propertyNames":{"maxLength":3}}`:                                                                         false,
		`{"type":"object","properties":{"a":{"enum":["x","y"]}}}`:                                                                   false,
		`{"type":"object","properties":{"a":{"const":"x"}}}`:                                                                        false,
		`{"type":"object","properties":{"a":{"pattern":"^x"}}}`:                                                                     false,
		`{"type":"object","properties":{"a":{"format":"email"}}}`:                                                                   false,
		`{"type":"object","properties":{"a":{"not":{"uniqueItems":true}}}}`:                                                         false,
		`{"$defs":{"s":{"minLength":1}},"properties":{"a":{"$ref":"#/$defs/s"}}}`:                                                   false,
		`{"anyOf":[{"type":"object"},{"type":"object","properties":{"a":{"maxLength":2}}}]}`:                                        false,
		invoice: false,
	} {
		s, err := Compile([]byte(schema))
		require.NoError(t, err, schema)
		assert.Equal(t, blind, s.blind, schema)
	}
}

// A blind check answers as the full one does, problems and all.
func TestBlindChecksAnswerAsFullOnes(t *testing.T) {
	schemas := []string{echo, `{"type":"object","properties":{"a":{"type":"array","items":{"type":["string","integer"]},"minItems":2},"b":{"type":"object","additionalProperties":{"type":"string"}}},"required":["a"]}`}
	calls := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat(`a \"quoted\" line\n`, 40) + `"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":7}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"txt":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bad \q escape"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","text":5}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":["x",1],"b":{"k":"v","l":2}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":["x"]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":"text"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"\xff\xfe\"}}}",
		`{"jsonrpc":"2.0","id":1e999,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`not json`,
		`{"params":{"arguments":{"text":"x"}},"params":{"arguments":{"text":1}}}`,
		`{"params":{"arguments":{"text":1}},"params":{"arguments":{"text":"x"}}}`,
		`{"params":{"arguments":{"text":1}},"params":7}`,
		`{"params":{"arguments":{"text":1},"arguments":null}}`,
		`{"par\u0061ms":{"\u0061rguments":{"text":1}}}`,
		`{"params":{"arguments":{"text":"x"}}} trailing`,
		"\xef\xbb\xbf{\"params\":{\"arguments\":{\"text\":\"x\"}}}",
		`{"id":[1,{"a":[true,false,null,-0.5e3]}],"params":{"x":{"y":[1e999]},"arguments":{"text":"x"}}}`,
		`{"id":[1,{"a":[tru]}],"params":{"arguments":{"text":"x"}}}`,
		`{"id":"\u12g4","params":{"arguments":{"text":"x"}}}`,
		`{"id":1,"params":{"arguments":{"text":"x"},}}`,
		`[{"params":{"arguments":{"text":1}}}]`,
		`{"params":{"arguments":{"text":"x"}}`,
		`{"params":` + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + `,"params":{"arguments":{"text":"x"}}}`,
	}
	for _, schema := range schemas {
		s, err := Compile([]byte(schema))
		require.NoError(t, err)
		require.True(t, s.blind, schema)
		full := *s
		full.blind = false
		for _, call := range calls {
			assert.Equal(t, mustCheckCall(t, &full, []byte(call)), mustCheckCall(t, s, []byte(call)), "%s\n%s", schema, call)
		}
	}
}

func BenchmarkCheckCallEcho1KiB(b *testing.B) {
	s, err := Compile([]byte(echo))
	require.NoError(b, err)
	const prose = `The gateway reads every call before the server does; it must not be what the user waits for. \"Quoted,\" she said.\n`
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat(prose, 8) + `"}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if p := mustCheckCall(b, s, body); p != nil {
			b.Fatal(p)
		}
	}
}

// FuzzBlindAgrees: whatever the body, a blind check finds what the full
// one finds.
func FuzzBlindAgrees(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"params":{"arguments":{"text":1}},"params":{"arguments":{"text":"x"}}}`,
		`{"params":{"arguments":{"a":["x",1],"b":{"k":"v"}}}}`,
		`{"params":{"arguments":{"text":"a\u0000\"b"}}}`,
	} {
		f.Add([]byte(seed))
	}
	schemas := []*Schema{}
	for _, src := range []string{echo, `{"type":"object","properties":{"a":{"type":"array","items":{"type":["string","integer"]},"minItems":2},"b":{"type":"object","additionalProperties":{"type":"string"}}},"required":["a"]}`} {
		s, err := Compile([]byte(src))
		require.NoError(f, err)
		require.True(f, s.blind)
		schemas = append(schemas, s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, s := range schemas {
			full := *s
			full.blind = false
			assert.Equal(t, mustCheckCall(t, &full, body), mustCheckCall(t, s, body), "%q", body)
		}
	})
}
