package toolschema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// The readers of toolschema keep the gateway's one rule
// (internal/jsonrpc, oneway.go): what they read is given once and only as
// written, keys compared decoded and folded.

// oneWayCases are objects that break the rule, each beside a spelling
// that keeps it; %s is where the object goes.
var oneWayCases = []struct {
	name      string
	twoWays   string
	oneWay    string
	shouldErr bool // the one-way spelling is refused too (too deep)
}{
	{"a key given twice", `{"type":"object","type":"string"}`, `{"type":"object"}`, false},
	{"again in another letter case", `{"type":"object","Type":"string"}`, `{"type":"object","other":"string"}`, false},
	{"an escaped key spelling the same name", `{"type":"object","\u0074ype":"string"}`, `{"\u0074ype":"object"}`, false},
	{"the Kelvin sign", `{"type":"object","properties":{"k":{},"\u212a":{}}}`, `{"type":"object","properties":{"k":{},"j":{}}}`, false},
	{"invalid UTF-8 decoded alike", "{\"type\":\"object\",\"properties\":{\"a\xff\":{},\"a\xfe\":{}}}", "{\"type\":\"object\",\"properties\":{\"a\xff\":{}}}", false},
	{"nested deep", `{"type":"object","properties":{"a":{"properties":{"b":{"type":"string","TYPE":"integer"}}}}}`, `{"type":"object","properties":{"a":{"properties":{"b":{"type":"string"}}}}}`, false},
}

// A schema read two ways does not compile: its tool's calls pass
// unchecked, and the catalog says so (BadSchema).
func TestASchemaReadTwoWaysIsNotLearned(t *testing.T) {
	for _, tt := range oneWayCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile([]byte(tt.twoWays))
			assert.ErrorIs(t, err, ErrTwoWays)
			_, err = Compile([]byte(tt.oneWay))
			assert.NoError(t, err)

			c := NewCatalog(0)
			key := ListKey{Endpoint: "e"}
			page, err := c.Learn(key, []byte(`{"tools":[{"name":"odd","inputSchema":`+tt.twoWays+`},{"name":"plain","inputSchema":{}}]}`), true, now)
			require.NoError(t, err)
			assert.Contains(t, page.Bad, "odd")
			_, found, _ := c.Lookup(key, "odd", now)
			assert.Equal(t, BadSchema, found)
			_, found, _ = c.Lookup(key, "plain", now)
			assert.Equal(t, Known, found, "the other tools are learned")
		})
	}
	deep := strings.Repeat(`{"not":`, maxSchemaDepth+1) + "{}" + strings.Repeat("}", maxSchemaDepth+1)
	_, err := Compile([]byte(deep))
	assert.Error(t, err, "nested too deep")
}

// A list whose members read are given twice or in another letter case is
// not learned: its calls pass unchecked, as when no list is known.
func TestAListReadTwoWaysIsNotLearned(t *testing.T) {
	tool := `{"name":"a","inputSchema":{"type":"object"}}`
	for _, tt := range []struct{ name, result string }{
		{"tools twice", `{"tools":[],"tools":[` + tool + `]}`},
		{"tools in another case", `{"tools":[` + tool + `],"Tools":[]}`},
		{"tools escaped and given twice", `{"tools":[` + tool + `],"\u0074ools":[]}`},
		{"the long s", `{"toolſ":[],"tools":[` + tool + `]}`},
		{"nextCursor twice", `{"tools":[` + tool + `],"nextCursor":"p2","nextCursor":null}`},
		{"nextCursor in another case", `{"tools":[` + tool + `],"NextCursor":"p2"}`},
		{"cacheScope in another case", `{"tools":[` + tool + `],"cachescope":"public"}`},
		{"ttlMs twice", `{"tools":[` + tool + `],"ttlMs":1,"ttlMs":2}`},
		{"a tool's name twice", `{"tools":[{"name":"a","name":"b","inputSchema":{}}]}`},
		{"a tool's name in another case", `{"tools":[{"name":"a","NAME":"b","inputSchema":{}}]}`},
		{"a tool's inputSchema twice", `{"tools":[{"name":"a","inputSchema":{},"inputSchema":{"type":"object"}}]}`},
		{"a tool's inputSchema in another case", `{"tools":[{"name":"a","inputschema":{},"inputSchema":{}}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCatalog(0)
			key := ListKey{Endpoint: "e"}
			_, err := c.Learn(key, []byte(tt.result), true, now)
			assert.ErrorIs(t, err, jsonrpc.ErrUncertain)
			_, found, _ := c.Lookup(key, "a", now)
			assert.Equal(t, NoList, found)
		})
	}
}

// The catalog reads a list as encoding/json reads it into its fields,
// where the rule lets it: unread members skipped (in any case, given any
// number of times), null as absent, the wrong type refused.
func TestAListIsReadAsEncodingJSONReadsIt(t *testing.T) {
	for _, in := range []string{
		`{}`, `{"tools":null}`, `{"tools":[]}`, `{"tools":[null,{"name":"a"}]}`,
		`{"tools":[{"name":"a","inputSchema":{"type":"object"},"description":"x","Description":"y","title":1,"title":2}],"nextCursor":"c\u00e9","ttlMs":60000,"cacheScope":"public","_meta":{"a":1,"A":2}}`,
		`{"tools":[{"name":null,"inputSchema":null}],"nextCursor":null,"ttlMs":null,"cacheScope":null}`,
		"{\"tools\":[{\"name\":\"a\xff\"}],\"nextCursor\":\"\\ud800\"}",
		` {"tools" : [ ] , "ttlMs" : -5 } `,
	} {
		got, err := readList([]byte(in))
		require.NoError(t, err, in)
		var want struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
			TTLMs      *int64  `json:"ttlMs"`
			CacheScope string  `json:"cacheScope"`
		}
		require.NoError(t, json.Unmarshal([]byte(in), &want), in)
		assert.Equal(t, want.NextCursor, got.NextCursor, in)
		assert.Equal(t, want.TTLMs, got.TTLMs, in)
		assert.Equal(t, want.CacheScope, got.CacheScope, in)
		require.Len(t, got.Tools, len(want.Tools), in)
		for i, tool := range want.Tools {
			assert.Equal(t, tool.Name, got.Tools[i].Name, in)
			assert.Equal(t, string(tool.InputSchema), string(got.Tools[i].InputSchema), in)
		}
	}
	for _, bad := range []string{
		`null`, `[]`, `"x"`, `{"tools":{}}`, `{"tools":[1]}`, `{"tools":[{"name":1}]}`, `{"nextCursor":1}`,
		`{"ttlMs":1.5}`, `{"ttlMs":1e3}`, `{"ttlMs":"1"}`, `{"ttlMs":NaN}`, `{"cacheScope":true}`,
		`{"tools":[]`, `{"tools":[]} x`, `{"x":tru}`, `{"x":1,}`,
	} {
		_, err := readList([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// A call's arguments read two ways are refused with words that name the
// field; so is a call whose params give arguments twice, which a server
// reading params into a struct would take the other of.
func TestACallReadTwoWaysIsRefused(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","properties":{"amount":{"type":"integer","maximum":10},"note":{"type":"string"}}}`))
	require.NoError(t, err)
	blind, err := Compile([]byte(`{"type":"object","properties":{"amount":{"type":"integer","maximum":10}}}`))
	require.NoError(t, err)
	require.True(t, blind.blind)
	for _, tt := range []struct{ name, body, field string }{
		{"a field given twice", string(callOf(`{"amount":1,"amount":1000}`)), "amount"},
		{"again in another letter case", string(callOf(`{"amount":1,"Amount":1000}`)), "Amount"},
		{"an escaped key spelling the same name", string(callOf(`{"amount":1,"\u0061mount":1000}`)), "amount"},
		{"the long s", string(callOf(`{"notes":"a","noteſ":"b","amount":1}`)), "noteſ"},
		{"invalid UTF-8 decoded alike", string(callOf("{\"a\xff\":1,\"a\xfe\":2}")), "a\ufffd"},
		{"deep in the arguments", string(callOf(`{"amount":1,"x":[{"y":{"z":1,"Z":2}}]}`)), "Z"},
		{"arguments in another letter case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"amount":1},"Arguments":{"amount":1000}}}`, "Arguments"},
		{"params twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"amount":1}},"params":{"name":"t","arguments":{"amount":1000}}}`, "params"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, schema := range []*Schema{s, blind} {
				problems := mustCheckCall(t, schema, []byte(tt.body))
				require.Len(t, problems, 1)
				if tt.field != "" {
					assert.Equal(t, "Field '"+tt.field+"' is given twice, or again in another letter case", problems[0].Problem)
				}
				assert.Equal(t, "Expected each field once, spelled one way.", problems[0].Expected)
			}
		})
	}
	// What the check does not read of the message may give a key twice
	// (the JSON-RPC reader refuses what it reads of it: method, id,
	// params' name).
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"amount":1},"_meta":{"a":1,"A":2}},"x":1,"X":2}`,
	} {
		assert.Empty(t, mustCheckCall(t, s, []byte(body)), body)
	}
	assert.Len(t, mustCheck(t, s, []byte(`{"amount":1,"AMOUNT":1}`)), 1, "Check reads arguments alike")
	deep := strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1)
	assert.Equal(t, notJSON, mustCheck(t, s, []byte(deep)), "nested deeper than the JSON-RPC reader reads")
}
