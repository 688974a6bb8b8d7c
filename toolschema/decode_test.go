package toolschema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
)

// decode must read what jsonschema.UnmarshalJSON (encoding/json with
// UseNumber) reads, and refuse what it refuses.
var decodeCorpus = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `-12E+2`, `"x"`,
	`{"a":[1,2,{"b":null}],"c":"d\"e\\f\/g\b\f\n\r\t"}`,
	`"\u00e9\u20ac\ud83d\ude00"`, `"\ud83d"`, `"\ud83d\u0041"`, `"\udc00"`, `"é€😀"`,
	"\"\xff\xfe\"", "\"a\xffb\\n\"", `{"a":1,"a":2}`, ` { "a" : [ ] } `,
	`{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `-`, `+1`, `1e`, `"\x"`, `"\u12"`, "\"a\nb\"",
	`{"a"}`, `{"a":}`, `[1 2]`, `nul`, `tru`, `"abc`, `{"a":1} x`, ``, ` `, `{"a":"\u0000"}`,
}

func reference(b []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

func TestDecodeReadsAsEncodingJSONDoes(t *testing.T) {
	for _, in := range decodeCorpus {
		got, err := decode([]byte(in))
		want, wantErr := reference([]byte(in))
		if wantErr != nil {
			assert.Error(t, err, "%q", in)
			continue
		}
		if assert.NoError(t, err, "%q", in) {
			assert.Equal(t, want, got, "%q", in)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, in := range decodeCorpus {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decode(in)
		want, wantErr := reference(in)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: decode err %v, encoding/json err %v", in, err, wantErr)
		}
		if err == nil {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if !bytes.Equal(g, w) {
				t.Fatalf("%q: decode %s, encoding/json %s", in, g, w)
			}
		}
	})
}
