package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// none stands for a member the message does not have, so that a test can
// tell it from an empty string.
const none = "<none>"

// learned is what Parse learned of one message, in a form a table
// can spell.
type learned struct {
	kind   Kind
	method string
	id     string
	tool   string
	// uri and task are params.uri and params.taskId, "" when absent (few
	// cases have them).
	uri, task string
}

func orNone(b []byte) string {
	if b == nil {
		return none
	}
	return string(b)
}

func learnedOf(msgs []Message) []learned {
	out := make([]learned, len(msgs))
	for i, m := range msgs {
		out[i] = learned{kind: m.Kind, method: orNone(m.Method), id: orNone(m.ID), tool: orNone(m.Name), uri: string(m.URI), task: string(m.TaskID)}
	}
	return out
}

func req(method, id, tool string) learned {
	return learned{kind: Request, method: method, id: id, tool: tool}
}
func note(method string) learned {
	return learned{kind: Notification, method: method, id: none, tool: none}
}
func resp(id string) learned { return learned{kind: Response, method: none, id: id, tool: none} }

// notRPC is valid JSON that is not a JSON-RPC message the gateway knows.
var notRPC = learned{kind: Invalid, method: none, id: none, tool: none}

func TestParseMessagesLearnsMethodIDAndTool(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  []learned
		batch bool
	}{
		{
			name: "tools/call request",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`,
			want: []learned{req("tools/call", `1`, "search")},
		},
		{
			name: "members in any order",
			body: `{"params":{"arguments":{"q":"x"},"name":"search"},"method":"tools/call","jsonrpc":"2.0","id":"a"}`,
			want: []learned{req("tools/call", `"a"`, "search")},
		},
		{
			name: "resource and task learned beside the name",
			body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///r\u00e9sum\u00e9","taskId":"t-1","name":"n"}}`,
			want: []learned{{kind: Request, method: "resources/read", id: `1`, tool: "n", uri: "file:///résumé", task: "t-1"}},
		},
		{
			name: "request without params",
			body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			want: []learned{req("tools/list", `2`, none)},
		},
		{
			name: "notification",
			body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			want: []learned{note("notifications/initialized")},
		},
		{
			name: "response with result",
			body: `{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}`,
			want: []learned{resp(`"srv-1"`)},
		},
		{
			name: "response with error",
			body: `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}`,
			want: []learned{resp(`3`)},
		},
		{
			name: "empty method is still a method",
			body: `{"jsonrpc":"2.0","id":1,"method":""}`,
			want: []learned{req("", `1`, none)},
		},
		{
			name: "empty tool name is present",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}`,
			want: []learned{req("tools/call", `1`, "")},
		},
		{
			name: "method that is not a string",
			body: `{"jsonrpc":"2.0","id":1,"method":42}`,
			want: []learned{{kind: Invalid, method: none, id: `1`, tool: none}},
		},
		{
			name: "method null",
			body: `{"jsonrpc":"2.0","id":1,"method":null}`,
			want: []learned{{kind: Invalid, method: none, id: `1`, tool: none}},
		},
		{
			name: "result without id",
			body: `{"jsonrpc":"2.0","result":{}}`,
			want: []learned{notRPC},
		},
		{
			name: "empty object",
			body: `{}`,
			want: []learned{notRPC},
		},
		{
			name: "params an array",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[{"name":"search"}]}`,
			want: []learned{req("tools/call", `1`, none)},
		},
		{
			name: "params null",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`,
			want: []learned{req("tools/call", `1`, none)},
		},
		{
			name: "name not a string",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":{"a":1}}}`,
			want: []learned{req("tools/call", `1`, none)},
		},
		{
			name: "name outside params is not the tool",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","name":"search","params":{"arguments":{"name":"x"}}}`,
			want: []learned{req("tools/call", `1`, none)},
		},
		{name: "top-level number", body: `42`, want: []learned{notRPC}},
		{name: "top-level string", body: `"tools/call"`, want: []learned{notRPC}},
		{name: "top-level null", body: `null`, want: []learned{notRPC}},
		{name: "top-level true", body: `true`, want: []learned{notRPC}},
		{name: "empty batch", body: `[]`, want: []learned{}, batch: true},
		{name: "empty batch with whitespace", body: " [ \n\t] ", want: []learned{}, batch: true},
		{
			name:  "batch of one",
			body:  `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}]`,
			want:  []learned{req("tools/call", `1`, "a")},
			batch: true,
		},
		{
			name: "mixed batch",
			body: `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}},` +
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}},` +
				`{"jsonrpc":"2.0","id":"s","result":{}},` +
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`,
			want: []learned{
				req("tools/call", `1`, "a"),
				note("notifications/cancelled"),
				resp(`"s"`),
				req("tools/list", `2`, none),
			},
			batch: true,
		},
		{
			name:  "batch with elements that are not objects",
			body:  `[1,"x",null,[{"method":"tools/call","id":1}],{"jsonrpc":"2.0","id":9,"method":"ping"},true]`,
			want:  []learned{notRPC, notRPC, notRPC, notRPC, req("ping", `9`, none), notRPC},
			batch: true,
		},
		{
			name: "members of ours inside arguments are not learned",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":` +
				`{"method":"evil","id":2,"name":"evil","Method":"x","params":{"name":"evil"},"a":1,"a":2}}}`,
			want: []learned{req("tools/call", `1`, "search")},
		},
		{
			name: "unknown members may repeat",
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","x":1,"x":2,"_meta":{},"_meta":[]}`,
			want: []learned{req("ping", `1`, none)},
		},
		{
			name: "longer or shorter look-alikes are not ours",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","methods":1,"i":2,"ids":3,"param":4,"params":{"name":"a","names":5,"nam":6}}`,
			want: []learned{req("tools/call", `1`, "a")},
		},
		{
			name: "dotless i does not fold to i in encoding/json",
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","ıd":2}`,
			want: []learned{req("ping", `1`, none)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, batch, err := Parse([]byte(tt.body), nil, unlimited)
			require.NoError(t, err)
			assert.Equal(t, tt.batch, batch, "batch")
			assert.Equal(t, tt.want, learnedOf(msgs))
		})
	}
}

func TestParseMessagesKeepsIDsAsExactBytes(t *testing.T) {
	ids := []string{
		`"abc"`,
		`""`,
		`"a\"b\\c\u00e9\n\/"`,
		`"é😀"`,
		`0`,
		`7`,
		`-7`,
		`12345678901234567890123`,
		`-12345678901234567890123.5e-300`,
		`1.5`,
		`1E+2`,
		`null`,
		`true`,
		`{"nested":[1,2]}`,
		`[]`,
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"a"}}`
			msgs, _, err := Parse([]byte(body), nil, unlimited)
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			assert.Equal(t, req("tools/call", id, "a"), learnedOf(msgs)[0])

			spaced := "{ \"id\" :\n\t" + id + " \r\n, \"method\" : \"tools/call\" }"
			msgs, _, err = Parse([]byte(spaced), nil, unlimited)
			require.NoError(t, err)
			assert.Equal(t, id, string(msgs[0].ID), "an id holds no surrounding whitespace")
		})
	}
}

func TestParseMessagesUnescapesWhatItLearns(t *testing.T) {
	tests := []struct {
		name string
		body string
		want learned
	}{
		{
			name: "escaped slash in method",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"a"}}`,
			want: req("tools/call", `1`, "a"),
		},
		{
			name: "unicode escape in method",
			body: `{"jsonrpc":"2.0","id":1,"method":"\u0074ools/call"}`,
			want: req("tools/call", `1`, none),
		},
		{
			name: "unicode escape in tool name",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search\u005fweb"}}`,
			want: req("tools/call", `1`, "search_web"),
		},
		{
			name: "surrogate pair in tool name",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\ud83d\ude00"}}`,
			want: req("tools/call", `1`, "😀"),
		},
		{
			name: "escaped member keys",
			body: `{"jsonrpc":"2.0","\u0069d":1,"\u006dethod":"tools/call","par\u0061ms":{"n\u0061me":"a"}}`,
			want: req("tools/call", `1`, "a"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _, err := Parse([]byte(tt.body), nil, unlimited)
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			assert.Equal(t, tt.want, learnedOf(msgs)[0])
		})
	}
}

func TestParseMessagesAcceptsWhitespaceEverywhere(t *testing.T) {
	body := " \t\r\n[ \n{ \"jsonrpc\" \t: \"2.0\" , \"id\"\r:\n1 ,\"method\" : \"tools/call\" ,\n\"params\" : { \"name\" : \"a\" ," +
		" \"arguments\" : { \"x\" : [ 1 , 2.5 , true , false , null , { } , [ ] ] } } } , \n{\"jsonrpc\":\"2.0\",\"method\":\"ping\"} \n] \r\n\t "
	msgs, batch, err := Parse([]byte(body), nil, unlimited)
	require.NoError(t, err)
	assert.True(t, batch)
	assert.Equal(t, []learned{req("tools/call", `1`, "a"), note("ping")}, learnedOf(msgs))
}

func TestParseMessagesAppendsToTheGivenSlice(t *testing.T) {
	var buf [1]Message
	msgs, _, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), buf[:0], unlimited)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Same(t, &buf[0], &msgs[0], "a single message fits the caller's buffer")
}

func TestParseMessagesRefusesAmbiguousMessages(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`},
		{"duplicate method, same value", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"ping"}`},
		{"Method alongside method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`},
		{"Method alone", `{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`},
		{"METHOD alone", `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call"}`},
		{"escaped duplicate method", `{"jsonrpc":"2.0","id":1,"method":"ping","me\u0074hod":"tools/call"}`},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`},
		{"ID", `{"jsonrpc":"2.0","ID":1,"method":"ping"}`},
		{"Id alongside id", `{"jsonrpc":"2.0","id":1,"Id":2,"method":"ping"}`},
		{"duplicate params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`},
		{"Params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{"name":"b"}}`},
		{"long s in params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"paramſ":{"name":"b"}}`},
		{"long s in params alone", `{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"b"}}`},
		{"duplicate jsonrpc", `{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}`},
		{"JSONRPC", `{"JSONRPC":"2.0","id":1,"method":"ping"}`},
		{"duplicate result", `{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`},
		{"long s in result", `{"jsonrpc":"2.0","id":1,"reſult":{}}`},
		{"Error", `{"jsonrpc":"2.0","id":1,"Error":{}}`},
		{"duplicate params.name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`},
		{"NAME", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"NAME":"b"}}`},
		{"Name alongside name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}`},
		{"duplicate params.uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a","uri":"file:///b"}}`},
		{"URI", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"URI":"file:///b"}}`},
		{"taskid alongside taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","taskid":"b"}}`},
		{"escaped duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","\u006eame":"b"}}`},
		{"one ambiguous message in a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"Method":"tools/call"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.body)), "the case must be valid JSON")
			_, _, err := Parse([]byte(tt.body), nil, unlimited)
			assert.ErrorIs(t, err, ErrAmbiguous)
		})
	}
}

// TestAmbiguousExactlyWhenEncodingJSONWouldMatch checks the ambiguity rule
// against the decoder it guards against: a key is refused exactly when Go's
// encoding/json would decode it into one of our members without being that
// member's exact spelling.
func TestAmbiguousExactlyWhenEncodingJSONWouldMatch(t *testing.T) {
	keys := []string{
		"method", "Method", "mEtHoD", "methoD", "methods", "metho", "méthod",
		"id", "ID", "iD", "ıd", "İd", "ids",
		"params", "PARAMS", "paramſ", "ParamS", "param",
		"result", "reſult", "RESULT", "error", "ERROR", "jsonrpc", "jſonrpc", "JsonRpc",
		"name", "Name", "NAME", "naMe", "nameſ", "\u212aey", "key", "other", "",
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			quoted, err := json.Marshal(key)
			require.NoError(t, err)

			top := `{` + string(quoted) + `:null}`
			decoded := `{` + string(quoted) + `:1}`
			var v struct {
				JSONRPC *json.RawMessage `json:"jsonrpc"`
				Method  *json.RawMessage `json:"method"`
				ID      *json.RawMessage `json:"id"`
				Params  *json.RawMessage `json:"params"`
				Result  *json.RawMessage `json:"result"`
				Error   *json.RawMessage `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(decoded), &v))
			matches := v.JSONRPC != nil || v.Method != nil || v.ID != nil || v.Params != nil || v.Result != nil || v.Error != nil
			exact := key == "jsonrpc" || key == "method" || key == "id" || key == "params" || key == "result" || key == "error"
			_, _, err = Parse([]byte(top), nil, unlimited)
			if matches && !exact {
				assert.ErrorIs(t, err, ErrAmbiguous, "top-level %q", key)
			} else {
				assert.NoError(t, err, "top-level %q", key)
			}

			inParams := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + string(quoted) + `:"x"}}`
			var p struct {
				Name *json.RawMessage `json:"name"`
			}
			require.NoError(t, json.Unmarshal([]byte(decoded), &p))
			_, _, err = Parse([]byte(inParams), nil, unlimited)
			if p.Name != nil && key != "name" {
				assert.ErrorIs(t, err, ErrAmbiguous, "params %q", key)
			} else {
				assert.NoError(t, err, "params %q", key)
			}
		})
	}
}

func TestParseMessagesRefusesWhatIsNotJSON(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		offset int
	}{
		{"empty body", ``, 0},
		{"only whitespace", " \n\t", 3},
		{"truncated object", `{"jsonrpc":"2.0","id":1,"method":"tools/ca`, 42},
		{"truncated after key", `{"id"`, 5},
		{"truncated after colon", `{"id":`, 6},
		{"truncated batch", `[{"id":1}`, 9},
		{"truncated batch after comma", `[{"id":1},`, 10},
		{"truncated literal", `{"id":tru`, 6},
		{"trailing garbage", `{"id":1} x`, 9},
		{"two messages", `{"id":1}{"id":2}`, 8},
		{"trailing comma in object", `{"id":1,}`, 8},
		{"trailing comma in batch", `[{"id":1},]`, 10},
		{"trailing comma in array", `{"a":[1,]}`, 8},
		{"leading comma in batch", `[,{"id":1}]`, 1},
		{"missing colon", `{"id" 1}`, 6},
		{"unquoted key", `{id:1}`, 1},
		{"single quotes", `{'id':1}`, 1},
		{"leading zero", `{"id":01}`, 7},
		{"bare minus", `{"id":-}`, 7},
		{"plus sign", `{"id":+1}`, 6},
		{"missing fraction", `{"id":1.}`, 8},
		{"missing exponent", `{"id":1e}`, 8},
		{"missing exponent after sign", `{"id":1e+}`, 9},
		{"leading dot", `{"id":.5}`, 6},
		{"hex number", `{"id":0x1}`, 7},
		{"lower-case nan", `{"id":nan}`, 6},
		{"plus infinity", `{"a":+Infinity}`, 5},
		{"truncated infinity", `{"a":Infin}`, 5},
		{"minus NaN", `{"a":-NaN}`, 6},
		{"bad escape", `{"method":"a\x"}`, 13},
		{"short unicode escape", `{"method":"\u12"}`, 15},
		{"non-hex unicode escape", `{"method":"\u12G4"}`, 15},
		{"escape at end", `{"method":"\`, 12},
		{"control character in string", "{\"method\":\"a\nb\"}", 12},
		{"tab in string", "{\"method\":\"a\tb\"}", 12},
		{"NUL in key", "{\"a\x00\":1}", 3},
		{"unterminated string", `{"method":"abc`, 14},
		{"byte order mark after whitespace", " \xef\xbb\xbf{}", 1},
		{"bad literal", `{"id":nul}`, 6},
		{"capital literal", `{"id":True}`, 6},
		{"closing bracket mismatch", `{"a":[1}`, 7},
		{"lone closing brace", `}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.False(t, json.Valid([]byte(tt.body)), "the case must be invalid JSON")
			_, _, err := Parse([]byte(tt.body), nil, unlimited)
			var syntax *SyntaxError
			require.ErrorAs(t, err, &syntax)
			assert.Equal(t, tt.offset, syntax.Offset, "offset: %v", err)
			assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", tt.offset))
		})
	}
}

func TestParseMessagesTakesNonFiniteNumbersAsPythonServersDo(t *testing.T) {
	// The official Python SDK server reads bodies with pydantic_core, which
	// takes NaN, Infinity and -Infinity as numbers: a body holding them is a
	// message to that server, so the gateway reads it too, and limits it.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"x":NaN}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":[Infinity,-Infinity],"name":"slow"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"a":[NaN, {"b":-Infinity}]}}}]`,
	} {
		msgs, _, err := Parse([]byte(body), nil, unlimited)
		require.NoError(t, err, body)
		assert.Equal(t, []learned{req("tools/call", "1", "slow")}, learnedOf(msgs), body)
	}
	msgs, _, err := Parse([]byte(`{"jsonrpc":"2.0","id":NaN,"method":"ping"}`), nil, unlimited)
	require.NoError(t, err)
	assert.True(t, IsNonFinite(msgs[0].ID), "the id is learned as it is, for the handler to refuse")
}

func TestParseMessagesSkipsALeadingByteOrderMark(t *testing.T) {
	msgs, _, err := Parse([]byte("\xef\xbb\xbf"+`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`), nil, unlimited)
	require.NoError(t, err)
	assert.Equal(t, []learned{req("tools/call", "1", "a")}, learnedOf(msgs))
}

func TestParseMessagesStopsAtMaxBeforeKeepingMore(t *testing.T) {
	three := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`
	msgs, batch, err := Parse([]byte(three), nil, 3)
	require.NoError(t, err)
	assert.True(t, batch)
	assert.Len(t, msgs, 3)

	msgs, _, err = Parse([]byte(three), nil, 2)
	assert.ErrorIs(t, err, ErrTooManyMessages)
	assert.Len(t, msgs, 2, "nothing is kept for the message beyond max")

	// A million elements: refused at the third, whatever follows (here,
	// not even valid JSON), with nothing kept for the rest.
	wide := []byte("[" + strings.Repeat("1,", 1_000_000) + "x")
	allocs := testing.AllocsPerRun(5, func() {
		var buf [2]Message
		_, _, err = Parse(wide, buf[:0], 2)
	})
	assert.ErrorIs(t, err, ErrTooManyMessages)
	assert.Zero(t, allocs)
}

func TestParseMessagesReportsSyntaxBeforeAmbiguity(t *testing.T) {
	// A body that is not JSON is not JSON, whatever else it repeats: the
	// verdict on syntax is encoding/json's.
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call",`
	_, _, err := Parse([]byte(body), nil, unlimited)
	var syntax *SyntaxError
	assert.ErrorAs(t, err, &syntax)
}

func nested(open, close string, depth int, inner string) string {
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

func TestParseMessagesBoundsNesting(t *testing.T) {
	tests := []struct {
		name string
		// body builds a body whose deepest value is nested depth levels
		// deep, counting every array and object, the outermost included.
		body func(depth int) string
	}{
		{"arrays", func(d int) string { return nested("[", "]", d, "") }},
		{"objects in arguments", func(d int) string {
			return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":` +
				nested(`{"a":`, `}`, d-2, "1") + `}}`
		}},
		{"arrays in a batch element", func(d int) string {
			return `[{"jsonrpc":"2.0","id":1,"method":"ping","params":` + nested("[", "]", d-2, "") + `}]`
		}},
		{"objects in a batch element's params", func(d int) string {
			return `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":` + nested(`{"a":`, `}`, d-3, "1") + `}}]`
		}},
		{"arrays in an id", func(d int) string { return `{"id":` + nested("[", "]", d-1, "") + `}` }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deepest := []byte(tt.body(MaxDepth))
			require.True(t, json.Valid(deepest))
			require.Equal(t, MaxDepth, depthOf(deepest))
			_, _, err := Parse(deepest, nil, unlimited)
			assert.NoError(t, err, "nesting of exactly maxDepth is accepted")

			tooDeep := []byte(tt.body(MaxDepth + 1))
			require.True(t, json.Valid(tooDeep), "encoding/json accepts deeper nesting than the gateway")
			require.Equal(t, MaxDepth+1, depthOf(tooDeep))
			_, _, err = Parse(tooDeep, nil, unlimited)
			var syntax *SyntaxError
			require.ErrorAs(t, err, &syntax)
			assert.Contains(t, syntax.msg, "nesting")
		})
	}
}

func TestParseMessagesSurvivesHostileNesting(t *testing.T) {
	body := []byte(strings.Repeat("[", 1<<20))
	_, _, err := Parse(body, nil, unlimited)
	var syntax *SyntaxError
	assert.ErrorAs(t, err, &syntax)
}

func TestParseMessagesDoesNotDecodeArguments(t *testing.T) {
	// Arguments full of escapes, deep structure and repeated keys cost
	// nothing but the scan: not one allocation.
	body := []byte(`{"jsonrpc":"2.0","id":"c\u0031","method":"tools/call","params":{"name":"write_file","arguments":` +
		`{"path":"C:\\tmp\\a.txt","content":"line 1\nline 2\t\"quoted\" \u00e9\ud83d\ude00",` +
		`"n\u0061me":"x","opts":[{"k\u0065y":"v\/w"},{"k\u0065y":"v\/w"}]}}}`)
	var buf [1]Message
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := Parse(body, buf[:0], unlimited); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// depthOf returns the deepest nesting of arrays and objects in a valid JSON
// text, counting the outermost.
func depthOf(body []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// FuzzParseMessages holds the scanner to encoding/json: it never panics, its
// verdict on syntax is json.Valid's (but for nesting beyond maxDepth, which
// it refuses), and what it learns of a message is what encoding/json decodes,
// unless it found the message ambiguous.
func FuzzParseMessages(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`,
		`[{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`,
		`{"id":1e5,"method":"tools\/call","params":{"name":"\u0061"}}`,
		`[]`,
		`{"id":1,"id":2}`,
		`{"a":[1,2,{"b":null}],"c":-0.5E-3}`,
		"{\"paramſ\":{\"name\":\"x\"}}",
		``,
		`{`,
		`"\ud800"`,
		`{"id":1,"method":"tools/call","params":{"name":"a","arguments":[NaN,Infinity,-Infinity]}}`,
		`{"id":1,"method":"m","params":{"_meta":{"traceparent":"00-a","tracestate":"k=v","x":[]},"name":"n"}}`,
		`{"id":1,"method":"m","params":{"_meta":{},"_meta":{"traceparent":"a"}}}`,
		`{"id":1,"method":"m","params":{"_Meta":{},"\u005fmeta":{"traceparent":"a","traceparent":1}}}`,
		`{"id":1,"method":"m","params":{"_meta":"x"}}`,
		`{"id":1,"method":"m","params":[{"_meta":{}}]}`,
		`[{"method":"a","params":{"_meta":{"tracestate":"x"}}}, 2, {"method":"b"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, batch, err := Parse(body, nil, unlimited)
		valid := json.Valid(body)
		// The scanner also takes the tokens NaN, Infinity and -Infinity, and
		// a leading byte order mark: where they appear, json.Valid is not its
		// judge.
		extended := bytes.Contains(body, []byte("NaN")) || bytes.Contains(body, []byte("Infinity")) ||
			bytes.HasPrefix(body, byteOrderMark)
		var syntax *SyntaxError
		switch {
		case errors.As(err, &syntax):
			if syntax.Offset < 0 || syntax.Offset > len(body) {
				t.Fatalf("offset %d outside a body of %d bytes", syntax.Offset, len(body))
			}
			if valid && depthOf(body) <= MaxDepth {
				t.Fatalf("json.Valid accepts %q, parseMessages says %v", body, err)
			}
			return
		case errors.Is(err, ErrAmbiguous):
			if !valid && !extended {
				t.Fatalf("json.Valid refuses %q, parseMessages says it is ambiguous", body)
			}
			return
		case err != nil:
			t.Fatalf("unexpected error %v", err)
		}
		if !valid {
			if !extended {
				t.Fatalf("json.Valid refuses %q, parseMessages accepts it", body)
			}
			return
		}
		elems := []json.RawMessage{body}
		if batch {
			elems = nil
			if err := json.Unmarshal(body, &elems); err != nil {
				t.Fatalf("a batch that is not an array: %v", err)
			}
		}
		if len(elems) != len(msgs) {
			t.Fatalf("%d messages learned, encoding/json finds %d", len(msgs), len(elems))
		}
		for i, elem := range elems {
			checkAgainstEncodingJSON(t, elem, msgs[i])
			checkCarrier(t, body, elem, msgs[i])
		}
	})
}

// checkAgainstEncodingJSON checks what the scanner learned of one message
// against what encoding/json decodes from it.
func checkAgainstEncodingJSON(t *testing.T, elem json.RawMessage, m Message) {
	var v struct {
		Method json.RawMessage `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(elem, &v) != nil {
		// Not an object: nothing is learned.
		if m.Kind != Invalid || m.Method != nil || m.ID != nil || m.Name != nil {
			t.Fatalf("learned %+v from %s, which is not an object", m, elem)
		}
		return
	}
	var method *string
	if len(v.Method) > 0 && v.Method[0] == '"' {
		method = new(string)
		if err := json.Unmarshal(v.Method, method); err != nil {
			t.Fatal(err)
		}
	}
	if method != nil {
		if string(m.Method) != *method {
			t.Fatalf("method %q, encoding/json decodes %q from %s", m.Method, *method, elem)
		}
	} else if m.Method != nil {
		t.Fatalf("method %q, encoding/json finds no string method in %s", m.Method, elem)
	}
	if string(m.ID) != string(v.ID) || (m.ID == nil) != (v.ID == nil) {
		t.Fatalf("id %q, encoding/json decodes %q from %s", m.ID, v.ID, elem)
	}
	var p struct {
		Name   json.RawMessage `json:"name"`
		URI    json.RawMessage `json:"uri"`
		TaskID json.RawMessage `json:"taskId"`
	}
	if len(v.Params) > 0 && v.Params[0] == '{' {
		if err := json.Unmarshal(v.Params, &p); err != nil {
			t.Fatal(err)
		}
	}
	sameString(t, "params.name", m.Name, p.Name, elem)
	sameString(t, "params.uri", m.URI, p.URI, elem)
	sameString(t, "params.taskId", m.TaskID, p.TaskID, elem)
	want := Invalid
	switch {
	case v.Method != nil && method == nil:
	case method != nil && v.ID != nil:
		want = Request
	case method != nil:
		want = Notification
	case (v.Result != nil || v.Error != nil) && v.ID != nil:
		want = Response
	}
	if m.Kind != want {
		t.Fatalf("kind %d, want %d for %s", m.Kind, want, elem)
	}
}

// TestSkipPlainStopsWhereTheByteLoopStops checks the eight-at-a-time skip
// against the plain byte loop, for every byte value at every position of a
// word, and on random strings.
func TestSkipPlainStopsWhereTheByteLoopStops(t *testing.T) {
	slow := func(b []byte, i int) int {
		for i < len(b) && plain[b[i]] {
			i++
		}
		return i
	}
	check := func(b []byte) {
		for start := 0; start <= len(b); start++ {
			require.Equal(t, slow(b, start), skipPlain(b, start), "%q from %d", b, start)
		}
	}
	for c := range 256 {
		for pos := range 17 {
			b := []byte(strings.Repeat("a", 17))
			b[pos] = byte(c)
			check(b)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(0x18 + rng.IntN(0x80))
		}
		check(b)
	}
}

// unlimited takes batches of any size.
const unlimited = math.MaxInt

// TestUnquoteDecodesAsEncodingJSON holds the key decoder to encoding/json,
// on which the ambiguity check depends: a key encoding/json would read as
// one of our members must be read so here too.
func TestUnquoteDecodesAsEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`plain`, `m\u0065thod`, `\"\\\/\b\f\n\r\t`, `\u0000`, `para\u006Ds`, `\u017f`, `paramſ`,
		`\ud83d\ude00`, `\ud83d`, `\ud83dx`, `\ud83d\u0041`, `\ude00\ud83d`, `a\ud83d\ud83d\ude00`,
		"\xff", "a\xc3", "\xe2\x82", "\xed\xa0\x80", `\uFFFD`, `\u212a`,
	} {
		checkUnquote(t, []byte(raw))
	}
}

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`m\u0065thod`, `\ud83d\ude00`, "\xff", `\ud83dx`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		quoted := append(append([]byte{'"'}, raw...), '"')
		s := scanner{b: quoted}
		if _, err := s.scanStr(); err != nil || s.i != len(quoted) {
			return // not a JSON string: the scanner refuses it before decoding
		}
		checkUnquote(t, raw)
	})
}

func checkUnquote(t *testing.T, raw []byte) {
	t.Helper()
	var want string
	require.NoError(t, json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &want), "%q", raw)
	assert.Equal(t, want, string(unquote(nil, raw)), "%q", raw)
}

func TestEscapedKeysCostNoAllocation(t *testing.T) {
	// Millions of short escaped or invalid keys: decoded on the stack.
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"` +
		strings.Repeat(`,"\u0061":0`, 10000) + strings.Repeat(",\"\xff\":0", 10000) + `}}`)
	var buf [1]Message
	allocs := testing.AllocsPerRun(10, func() {
		_, _, err := Parse(body, buf[:0], unlimited)
		require.NoError(t, err)
	})
	assert.Zero(t, allocs)
	_, _, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","name":"y"}}`), nil, unlimited)
	assert.ErrorIs(t, err, ErrAmbiguous, "an escaped member is still seen twice")
}

// sameString fails unless got is what encoding/json decodes from raw when
// raw is a string, and nil otherwise.
func sameString(t *testing.T, member string, got []byte, raw json.RawMessage, elem []byte) {
	t.Helper()
	if len(raw) == 0 || raw[0] != '"' {
		if got != nil {
			t.Fatalf("%s %q, encoding/json finds no string in %s", member, got, elem)
		}
		return
	}
	var want string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if got == nil || string(got) != want {
		t.Fatalf("%s %q, encoding/json decodes %q from %s", member, got, want, elem)
	}
}
