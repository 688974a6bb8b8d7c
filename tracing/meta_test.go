package tracing

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tp = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"

// inject is body as appendInjected writes it, body itself when unchanged.
func inject(body []byte, cs []carrier, values [][2]string) []byte {
	out, changed := appendInjected(nil, body, cs, values)
	if !changed {
		return body
	}
	return out
}

func TestTheSpanContextGoesInParamsMetaAndNothingElseChanges(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"` + tp + `"},"name":"x"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
			`{"params":{"_meta":{"traceparent":"` + tp + `"}},"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{`{ "jsonrpc":"2.0", "method":"notifications/initialized", "params": { } }`,
			`{ "jsonrpc":"2.0", "method":"notifications/initialized", "params": {"_meta":{"traceparent":"` + tp + `"} } }`},
		{`{"id":1,"method":"m","params":{"_meta":{"progressToken":"p\"}","traceparent":"00-old","tracestate":"a=b"},"x":1}}`,
			`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `","progressToken":"p\"}"},"x":1}}`},
		{`{"id":1,"method":"m","params":{"_meta":{}}}`,
			`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `"}}}`},
		{`{"id":1,"method":"m","params":{"_meta":{"a" : [1,{"b":"}"}] , "tracestate":"x"}}}`,
			`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `","a" : [1,{"b":"}"}]}}}`},
	} {
		cs := carriers([]byte(c.in))
		require.Len(t, cs, 1, c.in)
		got := inject([]byte(c.in), cs, [][2]string{{tp, ""}})
		assert.Equal(t, c.want, string(got))
		assert.True(t, json.Valid(got), "%s", got)
	}
}

func TestABatchGetsEachMessagesOwnContext(t *testing.T) {
	in := `[{"id":1,"method":"a","params":{}},{"method":"b"}]`
	cs := carriers([]byte(in))
	require.Len(t, cs, 2)
	got := inject([]byte(in), cs, [][2]string{{"00-1", "s=1"}, {"00-2", ""}})
	assert.Equal(t, `[{"id":1,"method":"a","params":{"_meta":{"traceparent":"00-1","tracestate":"s=1"}}},{"params":{"_meta":{"traceparent":"00-2"}},"method":"b"}]`, string(got))
}

func TestWhatCannotBeReadWithCertaintyIsLeftAsItIs(t *testing.T) {
	for _, in := range []string{
		`{"id":1,"method":"m","params":{"_meta":{},"_meta":{}}}`,
		`{"id":1,"method":"m","params":{},"params":{}}`,
		`{"id":1,"method":"m","params":{"_meta":{"traceparent":"a","traceparent":"b"}}}`,
		`"not an object"`,
		`[{"id":1,"method":"m","params":{"_meta":{},"_meta":{}}},{"id":2,"method":"m","params":{},"params":{}}]`,
	} {
		cs := carriers([]byte(in))
		got := inject([]byte(in), cs, [][2]string{{tp, ""}})
		assert.Equal(t, in, string(got))
	}
	for _, in := range []string{`{"id":1,"method":"m","params":[1,2]}`, `{"id":1,"method":"m","params":{"_meta":"x"}}`} {
		cs := carriers([]byte(in))
		got := inject([]byte(in), cs, [][2]string{{tp, ""}})
		assert.True(t, json.Valid(got), "%s -> %s", in, got)
	}
	assert.Nil(t, carriers([]byte(`{"id":1`)), "not JSON")
}

func TestTheClientsContextIsRead(t *testing.T) {
	cs := carriers([]byte(`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `","tracestate":"k=v"}}}`))
	require.Len(t, cs, 1)
	assert.Equal(t, tp, cs[0].traceparent)
	assert.Equal(t, "k=v", cs[0].tracestate)
	cs = carriers([]byte(`{"id":1,"method":"m","params":{"_meta":{"traceparent":7}}}`))
	assert.Empty(t, cs[0].traceparent, "not a string")
}
