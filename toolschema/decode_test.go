package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
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
	"\"\xff\xfe\"", "\"a\xffb\\n\"", ` { "a" : [ ] } `,
	`{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `-`, `+1`, `1e`, `"\x"`, `"\u12"`, "\"a\nb\"",
	`{"a"}`, `{"a":}`, `[1 2]`, `nul`, `tru`, `"abc`, `{"a":1} x`, ``, ` `, `{"a":"\u0000"}`,
}

// JSON the official SDKs read two ways: decode refuses it, where
// encoding/json reads it (the last of a key, in any letter case, into a
// struct's field).
var twoWaysCorpus = []string{
	`{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"\u0061":1,"a":2}`, `{"a\u0000":1,"a\u0000":2}`,
	"{\"a\xff\":1,\"a\xfe\":2}", `{"\ud800":1,"\udbff":2}`, `{"\ud800":1,"\ufffd":2}`,
	`{"x":{"k":1,"\u212a":2}}`, `{"paramſ":1,"PARAMS":2}`, `[1,{"b":[{"c":1,"C":2}]}]`,
}

// One way: no object gives a key twice, though objects may share keys.
var oneWayCorpus = []string{
	`[{"a":1},{"a":2}]`, `{"a":{"a":1}}`, `{"a":1,"b":{"A":2}}`, `{"ıd":1,"id":2}`, `{"a":1,"ab":2,"a\u0062c":3}`,
}

func TestDecodeReadsOneWay(t *testing.T) {
	for _, in := range twoWaysCorpus {
		_, err := decode([]byte(in))
		assert.ErrorIs(t, err, ErrTwoWays, "%q", in)
		assert.True(t, twoWaysReference([]byte(in)), "%q", in)
		_, err = reference([]byte(in))
		assert.NoError(t, err, "encoding/json reads %q", in)
	}
	for _, in := range oneWayCorpus {
		got, err := decode([]byte(in))
		want, _ := reference([]byte(in))
		assert.NoError(t, err, "%q", in)
		assert.Equal(t, want, got, "%q", in)
		assert.False(t, twoWaysReference([]byte(in)), "%q", in)
	}
}

// twoWaysReference reports whether an object of the JSON in, as
// encoding/json reads it, gives a key twice under strings.EqualFold.
func twoWaysReference(in []byte) bool {
	type frame struct {
		object, atKey bool
		keys          []string
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].atKey = true
			}
			continue
		}
		if top != nil && top.object && top.atKey {
			key := tok.(string)
			for _, k := range top.keys {
				if strings.EqualFold(k, key) {
					return true
				}
			}
			top.keys = append(top.keys, key)
			top.atKey = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{object: d == '{', atKey: d == '{'})
			continue
		}
		if top != nil && top.object {
			top.atKey = true
		}
	}
}

func TestNumbersOutOfRangeAndTheByteOrderMark(t *testing.T) {
	for _, n := range []string{"1e999999", "1e1000001", "-1e309", "1" + strings.Repeat("0", 80), "1e-400", "-1e-999999", "0.5e-330", "0e1000", "0E-99999"} {
		_, err := decode([]byte(`{"n":` + n + `}`))
		assert.ErrorIs(t, err, ErrNumberRange, n)
	}
	for _, n := range []string{"0e999", "1e-320", "-0.0", "123456789012345", "1234567890123456789", "1.5E+308"} {
		v, err := decode([]byte(n))
		assert.NoError(t, err, n)
		assert.Equal(t, json.Number(n), v)
	}
	v, err := decode([]byte("\xef\xbb\xbf{\"a\":1}"))
	assert.NoError(t, err)
	assert.Equal(t, map[string]any{"a": json.Number("1")}, v)
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
	for _, in := range slices.Concat(decodeCorpus, twoWaysCorpus, oneWayCorpus) {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if bytes.HasPrefix(in, []byte("\xef\xbb\xbf")) {
			return // skipped on purpose, as the SDKs skip it
		}
		got, err := decode(in)
		if errors.Is(err, ErrNumberRange) {
			return // refused on purpose, where encoding/json makes a big number
		}
		if errors.Is(err, ErrTwoWays) {
			if !twoWaysReference(in) {
				t.Fatalf("%q: refused as read two ways, but no object gives a key twice", in)
			}
			return // refused on purpose, where encoding/json keeps the last
		}
		want, wantErr := reference(in)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: decode err %v, encoding/json err %v", in, err, wantErr)
		}
		if err == nil && twoWaysReference(in) {
			t.Fatalf("%q: read, though an object gives a key twice", in)
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
