package tracing

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

const tp = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"

// spanContext is the span context a traceparent and tracestate say.
func spanContext(t testing.TB, traceparent, tracestate string) trace.SpanContext {
	sc, ok := clientContext([]byte(`{"traceparent":"`+traceparent+`","tracestate":"`+tracestate+`"}`), &jsonrpc.Carrier{
		Traceparent: jsonrpc.MetaMember{Start: 1, Value: 15, End: 17 + len(traceparent)},
		Tracestate:  jsonrpc.MetaMember{Start: 18 + len(traceparent), Value: 31 + len(traceparent), End: 33 + len(traceparent) + len(tracestate)},
	})
	require.True(t, ok, traceparent)
	return sc
}

// inject is body as AppendBody writes it for spans of the given contexts,
// one per message, body itself when unchanged.
func inject(t testing.TB, body string, contexts ...trace.SpanContext) string {
	msgs, _, err := jsonrpc.Parse([]byte(body), nil, 100)
	if err != nil {
		return body // refused before any span
	}
	s := &Spans{splice: true}
	for i, m := range msgs {
		if m.Kind != jsonrpc.Request && m.Kind != jsonrpc.Notification {
			s.splice = false
			continue
		}
		span := trace.SpanFromContext(trace.ContextWithSpanContext(context.Background(), contexts[i]))
		s.msgs = append(s.msgs, message{span: span, carrier: m.Carrier()})
	}
	out, changed := s.AppendBody(nil, []byte(body))
	if !changed {
		return body
	}
	return string(out)
}

func TestTheSpanContextGoesInParamsMetaAndNothingElseChanges(t *testing.T) {
	sc := spanContext(t, tp, "")
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
		// The members taken out, wherever they are, with one comma each;
		// the spaces of the others kept.
		{`{"id":1,"method":"m","params":{"_meta":{ "traceparent" : "x" , "a":1 ,"tracestate":"y"}}}`,
			`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `", "a":1}}}`},
		{`{"id":1,"method":"m","params":{"_meta":{"tracestate":"y","traceparent":"x"}}}`,
			`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `"}}}`},
		{`{"id":1,"method":"m","params":{"_meta":{ "traceparent":"x",	"a":1 , "b":2 }}}`,
			`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `", "a":1 , "b":2 }}}`},
		{`{"id":1,"method":"m","params":{"_meta":{ "a":1,"traceparent":"x", "b":2,"tracestate":"y" }}}`,
			`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `", "a":1, "b":2 }}}`},
		{"\xef\xbb\xbf{\"id\":1,\"method\":\"m\"}",
			"\xef\xbb\xbf{\"params\":{\"_meta\":{\"traceparent\":\"" + tp + "\"}},\"id\":1,\"method\":\"m\"}"},
	} {
		got := inject(t, c.in, sc)
		assert.Equal(t, c.want, got)
		if c.in[0] == '{' {
			assert.True(t, json.Valid([]byte(got)), "%s", got)
		}
	}
}

func TestABatchGetsEachMessagesOwnContext(t *testing.T) {
	const tp1, tp2 = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba90201-01", "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba90202-00"
	in := `[{"id":1,"method":"a","params":{}},{"method":"b"}]`
	got := inject(t, in, spanContext(t, tp1, "s=1"), spanContext(t, tp2, ""))
	assert.Equal(t, `[{"id":1,"method":"a","params":{"_meta":{"traceparent":"`+tp1+`","tracestate":"s=1"}}},{"params":{"_meta":{"traceparent":"`+tp2+`"}},"method":"b"}]`, got)
}

func TestWhatCannotBeReadWithCertaintyIsLeftAsItIs(t *testing.T) {
	sc := spanContext(t, tp, "")
	for _, in := range []string{
		`{"id":1,"method":"m","params":{"_meta":{},"_meta":{}}}`,
		`{"id":1,"method":"m","params":{},"params":{}}`,
		`{"id":1,"method":"m","params":{"_meta":{"traceparent":"a","traceparent":"b"}}}`,
		`{"id":1,"method":"m","params":{"_Meta":{"traceparent":"a"}}}`,
		`{"id":1,"method":"m","params":[1,2]}`,
		`{"id":1,"method":"m","params":{"_meta":"x"}}`,
		`"not an object"`,
		`[{"id":1,"method":"m"},{"id":1,"result":{}}]`,
	} {
		assert.Equal(t, in, inject(t, in, sc, sc))
	}
	// A message left as it is in a batch: the others get theirs.
	in := `[{"id":1,"method":"m","params":{"_meta":{},"_meta":{}}},{"id":2,"method":"m","params":{}}]`
	assert.Equal(t, `[{"id":1,"method":"m","params":{"_meta":{},"_meta":{}}},{"id":2,"method":"m","params":{"_meta":{"traceparent":"`+tp+`"}}}]`, inject(t, in, sc, sc))
}

// A tracestate is printable ASCII, a quote and a backslash included (the
// client's tracestate header may hold them): written as a JSON string.
func TestATracestateIsWrittenAsAJSONString(t *testing.T) {
	ts, err := trace.ParseTraceState(`k=a"b\c`)
	require.NoError(t, err)
	sc := spanContext(t, tp, "").WithTraceState(ts)
	got := inject(t, `{"id":1,"method":"m"}`, sc)
	var v struct {
		Params struct {
			Meta map[string]string `json:"_meta"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal([]byte(got), &v), got)
	assert.Equal(t, `k=a"b\c`, v.Params.Meta["tracestate"])
}

func TestTheClientsContextIsRead(t *testing.T) {
	read := func(body string) (trace.SpanContext, bool) {
		msgs, _, err := jsonrpc.Parse([]byte(body), nil, 1)
		require.NoError(t, err)
		c := msgs[0].Carrier()
		return clientContext([]byte(body), &c)
	}
	sc, ok := read(`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `","tracestate":"k=v"}}}`)
	require.True(t, ok)
	assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", sc.TraceID().String())
	assert.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
	assert.Equal(t, "k=v", sc.TraceState().String())
	for _, body := range []string{
		`{"id":1,"method":"m","params":{"_meta":{"traceparent":7}}}`,
		`{"id":1,"method":"m","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-0\u0031"}}}`,
		`{"id":1,"method":"m","params":{"_meta":{"traceparent":"` + tp + `"},"_meta":{}}}`,
		`{"id":1,"method":"m","params":{"_meta":{"traceparent":"00-bad"}}}`,
	} {
		_, ok := read(body)
		assert.False(t, ok, body)
	}
}

// FuzzTheContextGoesInMetaAndNothingElseChanges: for any body of requests
// and notifications, what the upstream is sent is JSON, each message's
// _meta holds its span's traceparent, and without it each message is what
// the client sent.
func FuzzTheContextGoesInMetaAndNothingElseChanges(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`[{"id":1,"method":"a","params":{}},{"method":"b"}]`,
		`{"id":1,"method":"m","params":{"_meta":{ "tracestate":"y" , "traceparent" : "x" ,"a":[1]}}}`,
		`{"id":1,"method":"m","params":{"_meta":{"a":{},"traceparent":"x"},"_META":1}}`,
		`{ "id" : 1 , "method" : "m" , "params" : { "_meta" : { } } }`,
	} {
		f.Add([]byte(s))
	}
	sc := spanContext(f, tp, "k=v")
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		got := inject(t, string(body), repeat(sc, 1000)...)
		if got == string(body) {
			return
		}
		require.True(t, json.Valid([]byte(got)), "%s -> %s", body, got)
		before, after := decoded(t, body), decoded(t, []byte(got))
		require.Len(t, after, len(before))
		for i := range before {
			params, _ := after[i]["params"].(map[string]any)
			meta, _ := params["_meta"].(map[string]any)
			if meta == nil {
				assert.Equal(t, before[i], after[i], "a message left as it is")
				continue
			}
			assert.Equal(t, tp, meta["traceparent"], "%s", got)
			assert.Equal(t, "k=v", meta["tracestate"], "%s", got)
			delete(meta, "traceparent")
			delete(meta, "tracestate")
			was, _ := before[i]["params"].(map[string]any)
			if was == nil {
				delete(after[i], "params")
			} else if _, had := was["_meta"]; !had && len(meta) == 0 {
				delete(params, "_meta")
			}
			if wasMeta, _ := was["_meta"].(map[string]any); wasMeta != nil {
				delete(wasMeta, "traceparent")
				delete(wasMeta, "tracestate")
			}
			assert.Equal(t, before[i], after[i], "%s -> %s", body, got)
		}
	})
}

func repeat(sc trace.SpanContext, n int) []trace.SpanContext {
	out := make([]trace.SpanContext, n)
	for i := range out {
		out[i] = sc
	}
	return out
}

// decoded is each message of body, as encoding/json decodes it.
func decoded(t *testing.T, body []byte) []map[string]any {
	var batch []map[string]any
	if json.Unmarshal(body, &batch) == nil {
		return batch
	}
	var one map[string]any
	require.NoError(t, json.Unmarshal(body, &one))
	return []map[string]any{one}
}
