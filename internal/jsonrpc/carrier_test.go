package jsonrpc

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// at is the text of body a span spans.
func at(body string, s Span) string { return body[s.Start:s.End] }

func TestTheCarrierSaysWhereParamsAndMetaLie(t *testing.T) {
	body := `{"id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":3, "traceparent" : "00-a","tracestate":"k=v"},"arguments":{}}}`
	msgs, _, err := Parse([]byte(body), nil, unlimited)
	require.NoError(t, err)
	c := msgs[0].Carrier()
	assert.False(t, c.Unsure)
	assert.Equal(t, body, at(body, c.Object))
	assert.Equal(t, `{"name":"x","_meta":{"progressToken":3, "traceparent" : "00-a","tracestate":"k=v"},"arguments":{}}`, at(body, c.Params))
	assert.Equal(t, `{"progressToken":3, "traceparent" : "00-a","tracestate":"k=v"}`, at(body, c.Meta))
	assert.Equal(t, `"traceparent" : "00-a"`, body[c.Traceparent.Start:c.Traceparent.End])
	assert.Equal(t, `"00-a"`, body[c.Traceparent.Value:c.Traceparent.End])
	assert.Equal(t, `"tracestate":"k=v"`, body[c.Tracestate.Start:c.Tracestate.End])
	assert.Equal(t, `"k=v"`, body[c.Tracestate.Value:c.Tracestate.End])
}

func TestTheCarrierOfEachMessageOfABatchIsInTheWholeBody(t *testing.T) {
	body := "\xef\xbb\xbf [ 1, {\"method\":\"a\"} , {\"method\":\"b\",\"params\":{\"_meta\":{}}}]"
	msgs, _, err := Parse([]byte(body), nil, unlimited)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	assert.Equal(t, Carrier{}, msgs[0].Carrier(), "not an object")
	assert.Equal(t, `{"method":"a"}`, at(body, msgs[1].Carrier().Object))
	assert.Zero(t, msgs[1].Carrier().Params, "no params")
	assert.Equal(t, `{"_meta":{}}`, at(body, msgs[2].Carrier().Params))
	assert.Equal(t, `{}`, at(body, msgs[2].Carrier().Meta))
	assert.Zero(t, msgs[2].Carrier().Traceparent)
}

// What leaves the carrier unsure is no reason to refuse the message: the
// reader's strictness is its own members'.
func TestACarrierIsUnsureWhereServersCouldReadAnotherMeta(t *testing.T) {
	for _, params := range []string{
		`{"_meta":{},"_meta":{}}`,
		`{"_meta":{"traceparent":"a"},"_Meta":{"traceparent":"b"}}`,
		`{"_META":{}}`,
		`{"\u005fMeta":{}}`,
		`{"_meta":"x"}`,
		`{"_meta":null,"_meta":{}}`,
		`{"_meta":{"traceparent":"a","traceparent":"b"}}`,
		`{"_meta":{"tracestate":"a","tracestate":"b"}}`,
		`[1,2]`,
		`null`,
	} {
		msgs, _, err := Parse([]byte(`{"id":1,"method":"m","params":`+params+`}`), nil, unlimited)
		require.NoError(t, err, params)
		assert.True(t, msgs[0].Carrier().Unsure, params)
	}
	for _, params := range []string{
		`{"\u005fmeta":{"TraceParent":"x","traceparent":"y","\u0074racestate":"z"}}`,
		`{"meta":{},"_meta_":{},"_meta":{"_meta":{},"traceparentx":1}}`,
		`{"name":"x"}`,
	} {
		msgs, _, err := Parse([]byte(`{"id":1,"method":"m","params":`+params+`}`), nil, unlimited)
		require.NoError(t, err, params)
		assert.False(t, msgs[0].Carrier().Unsure, params)
	}
	_, _, err := Parse([]byte(`{"id":1,"method":"m","params":{"Name":"x","_meta":{}}}`), nil, unlimited)
	assert.ErrorIs(t, err, ErrAmbiguous, "a member of ours in another case, as before")
}

// checkCarrier holds the carrier of a message to encoding/json: what it
// spans is what encoding/json finds there, and it is unsure exactly where
// params or _meta is not an object, _meta is given twice or in another
// letter case, or traceparent or tracestate twice.
func checkCarrier(t *testing.T, body []byte, elem json.RawMessage, m Message) {
	c := m.Carrier()
	elem = bytes.TrimSpace(elem)
	if len(elem) == 0 || elem[0] != '{' {
		if c != (Carrier{}) {
			t.Fatalf("carrier %+v for %s, not an object", c, elem)
		}
		return
	}
	if !bytes.Equal(body[c.Object.Start:c.Object.End], elem) {
		t.Fatalf("object %q, encoding/json finds %s", body[c.Object.Start:c.Object.End], elem)
	}
	var v struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(elem, &v); err != nil {
		t.Fatal(err)
	}
	want := Carrier{Object: c.Object}
	if v.Params != nil && v.Params[0] != '{' {
		want.Unsure = true
	}
	if v.Params != nil && v.Params[0] == '{' {
		want.Params = c.Params
		if !bytes.Equal(body[c.Params.Start:c.Params.End], v.Params) {
			t.Fatalf("params %q, encoding/json finds %s", body[c.Params.Start:c.Params.End], v.Params)
		}
		meta, unsure := memberOnce(t, v.Params, "_meta", true)
		want.Unsure = unsure || (meta != nil && meta[0] != '{')
		if meta != nil && !want.Unsure {
			want.Meta = c.Meta
			if !bytes.Equal(body[c.Meta.Start:c.Meta.End], meta) {
				t.Fatalf("_meta %q, encoding/json finds %s", body[c.Meta.Start:c.Meta.End], meta)
			}
			tp, twice := memberOnce(t, meta, "traceparent", false)
			ts, again := memberOnce(t, meta, "tracestate", false)
			want.Unsure = twice || again
			want.Traceparent = checkMetaMember(t, body, c.Traceparent, "traceparent", tp)
			want.Tracestate = checkMetaMember(t, body, c.Tracestate, "tracestate", ts)
		}
	}
	if want.Unsure {
		want = Carrier{Object: c.Object, Params: want.Params, Unsure: true}
		c = Carrier{Object: c.Object, Params: c.Params, Unsure: c.Unsure}
	}
	if c != want {
		t.Fatalf("carrier %+v, want %+v for %s", c, want, elem)
	}
}

// memberOnce is the value of obj's member key, and whether it is unsure:
// given twice, or (folded) in another letter case.
func memberOnce(t *testing.T, obj json.RawMessage, key string, folded bool) (value json.RawMessage, unsure bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		switch {
		case k == key:
			unsure = unsure || value != nil
			value = raw
		case folded && strings.EqualFold(k.(string), key):
			unsure = true
		}
	}
	return value, unsure
}

// checkMetaMember checks where a member of _meta lies against its value,
// as encoding/json reads it, and returns it.
func checkMetaMember(t *testing.T, body []byte, mm MetaMember, key string, value json.RawMessage) MetaMember {
	if value == nil {
		return MetaMember{}
	}
	if !bytes.Equal(body[mm.Value:mm.End], value) {
		t.Fatalf("%s's value %q, encoding/json finds %s", key, body[mm.Value:mm.End], value)
	}
	var one map[string]json.RawMessage
	if err := json.Unmarshal([]byte("{"+string(body[mm.Start:mm.End])+"}"), &one); err != nil || len(one) != 1 || one[key] == nil {
		t.Fatalf("%s is not the member %q (%v)", key, body[mm.Start:mm.End], err)
	}
	return mm
}

// A message keeps its carrier in half the room: what fits comes back as
// it was, and a body too long for it leaves the message unsure.
func TestACarrierIsKeptPacked(t *testing.T) {
	c := Carrier{Object: Span{1, 90}, Params: Span{20, 80}, Meta: Span{30, 70},
		Traceparent: MetaMember{31, 45, 60}, Tracestate: MetaMember{61, 62, 69}, Unsure: true}
	m := Message{carrier: c.pack()}
	assert.Equal(t, c, m.Carrier())
	m = Message{carrier: Carrier{Object: Span{0, math.MaxInt32 + 1}, Params: Span{1, 2}}.pack()}
	assert.Equal(t, Carrier{Unsure: true}, m.Carrier())
}
