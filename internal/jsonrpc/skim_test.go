package jsonrpc

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const maxSkimmedID = 1538

// skim gives body to a skimmer in pieces cut at cuts.
func skim(body []byte, cuts ...int) (Message, error) {
	k := NewSkimmer(maxSkimmedID)
	prev := 0
	for _, c := range cuts {
		k.Write(body[prev:c])
		prev = c
	}
	k.Write(body[prev:])
	return k.Message()
}

// sameSkim checks that a skimmer learns what Each learns of a single
// message Each reads without error, however the message is cut in two, and
// that a skimmer never takes for a message what Each refuses as ambiguous.
func sameSkim(t *testing.T, body []byte) {
	t.Helper()
	var want Message
	batch, err := Each(body, func(m Message) error {
		want = Message{Kind: m.Kind, ID: m.ID}
		return nil
	})
	if batch || (err != nil && !errors.Is(err, ErrAmbiguous)) {
		return
	}
	for i := 0; i <= len(body); i++ {
		got, skimErr := skim(body, i)
		same := skimErr == nil && got.Kind == want.Kind && string(got.ID) == string(want.ID)
		if err != nil {
			// The skimmer does not read params, whose members Each also
			// finds ambiguous.
			if !errors.Is(skimErr, ErrAmbiguous) && !same {
				t.Fatalf("%q cut at %d: Each finds it ambiguous, the skimmer reads kind %d, id %q, %v", body, i, got.Kind, got.ID, skimErr)
			}
			continue
		}
		if !same {
			t.Fatalf("%q cut at %d: Each reads kind %d, id %q; the skimmer kind %d, id %q, %v", body, i, want.Kind, want.ID, got.Kind, got.ID, skimErr)
		}
	}
}

var skimCorpus = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`,
	`{"result":{"content":[{"type":"text","text":"a \"quoted\" }] text"}]},"jsonrpc":"2.0","id":"r-1"}`,
	`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"messages":[]}}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":[1,2.5e-3,true,null]}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}`,
	`{"jsonrpc":"2.0","i\u0064":"caf\u00e9","result":{}}`,
	`{"jsonrpc":"2.0","id":1,"ID":2,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`,
	`{"jsonrpc":"2.0","method":1,"id":1}`,
	`{"id":-Infinity,"result":{}}`,
	"\xef\xbb\xbf {\"id\":{\"a\":[1]},\"result\":0}\n",
	`  {} `,
	`"just a string"`,
	`12`,
	`{"id":1,"result":{},"paramſ":{}}`,
	`{"` + strings.Repeat("k", 100) + `":1,"id":2,"result":[]}`,
}

func TestSkimmerLearnsWhatEachLearnsHoweverTheMessageIsCut(t *testing.T) {
	for _, body := range skimCorpus {
		sameSkim(t, []byte(body))
	}
}

func FuzzSkimmerAgreesWithEach(f *testing.F) {
	for _, body := range skimCorpus {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 4<<10 {
			return
		}
		sameSkim(t, body)
	})
}

func TestSkimmerTellsWhatItCannotRead(t *testing.T) {
	tests := []struct {
		name, body string
		want       error
	}{
		{"a message cut short", `{"jsonrpc":"2.0","id":1,"result":{"a":"`, &SyntaxError{}},
		{"a bracket that closes another", `{"id":1,"result":[}}`, &SyntaxError{}},
		{"a control character in a string", "{\"id\":1,\"result\":\"a\nb\"}", &SyntaxError{}},
		{"a bad escape", `{"id":1,"result":"\x"}`, &SyntaxError{}},
		{"bytes after the message", `{"id":1,"result":{}} {}`, &SyntaxError{}},
		{"an id given twice", `{"id":1,"result":{},"id":2}`, ErrAmbiguous},
		{"an id in another letter case", `{"Id":1,"result":{}}`, ErrAmbiguous},
		{"an id longer than kept", `{"result":{},"id":"` + strings.Repeat("9", maxSkimmedID) + `"}`, ErrIDTooLong},
		{"nesting beyond the bound", strings.Repeat("[", MaxDepth+1), &SyntaxError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := skim([]byte(tt.body), len(tt.body)/2)
			var syntax *SyntaxError
			if _, ok := tt.want.(*SyntaxError); ok {
				assert.ErrorAs(t, err, &syntax)
				return
			}
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

// Whatever a message's size, the skimmer keeps its id and a few bytes: the
// id of a result written after megabytes of it, as the TypeScript SDK
// writes responses, is learned.
func TestSkimmerKeepsTheIDAndNotTheMessage(t *testing.T) {
	pad := []byte(strings.Repeat("x", 64<<10))
	k := NewSkimmer(maxSkimmedID)
	k.Write([]byte(`{"result":{"pad":"`))
	for range 9 * 16 {
		k.Write(pad)
	}
	k.Write([]byte(`","tools":[{"name":"admin_reset"}],"nested":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `},"jsonrpc":"2.0","id":"req-7"}`))
	m, err := k.Message()
	require.NoError(t, err)
	assert.Equal(t, Response, m.Kind)
	assert.Equal(t, `"req-7"`, string(m.ID))
	assert.LessOrEqual(t, cap(k.key.b)+cap(k.id.b)+cap(k.open), maxMemberKey+maxSkimmedID+MaxDepth, "what is kept of 9 MiB")
}

// BenchmarkSkimmerLargeResult skims a 9 MiB result in the 32 KiB pieces a
// proxy writes: the pad a word at a time.
func BenchmarkSkimmerLargeResult(b *testing.B) {
	body := []byte(`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 9<<20) + `"}]},"jsonrpc":"2.0","id":7}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		k := NewSkimmer(maxSkimmedID)
		for p := body; len(p) > 0; {
			n := min(32<<10, len(p))
			k.Write(p[:n])
			p = p[n:]
		}
		if m, err := k.Message(); err != nil || m.Kind != Response {
			b.Fatal(m, err)
		}
	}
}
