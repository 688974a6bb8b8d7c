package tracing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// traced is the spans of body's messages under a recording HTTP span, and
// the recorder that receives them once ended.
func traced(t *testing.T, body string) (*Spans, *tracetest.SpanRecorder) {
	return tracedWith(t, body, nil)
}

// tracedWith is traced, the request bearing header.
func tracedWith(t *testing.T, body string, header map[string]string) (*Spans, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, http := tp.Tracer("test").Start(context.Background(), "http")
	t.Cleanup(func() { http.End() })
	x := featuretest.Post(t, body)
	x.Request = x.Request.WithContext(ctx)
	for k, v := range header {
		x.Request.Header.Set(k, v)
	}
	s := Start(x, nil)
	require.NotNil(t, s)
	return s, rec
}

func errorTypes(rec *tracetest.SpanRecorder) map[string]string {
	out := map[string]string{}
	for _, s := range rec.Ended() {
		out[s.Name()] = ""
		for _, a := range s.Attributes() {
			if a.Key == "error.type" {
				out[s.Name()] = a.Value.AsString()
			}
		}
	}
	return out
}

func TestEachResponseEndsItsRequestsSpanWithItsOutcome(t *testing.T) {
	s, rec := traced(t, `[`+strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok"}}`,
		`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"failed"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"refused"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"odd"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nested"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"unanswered"}}`,
	}, ",")+`]`)
	_, err := s.Message(nil, []byte(`[{"jsonrpc":"2.0","id":1,"result":{"content":[]}},`+
		`{"jsonrpc":"2.0","id":"two","result":{"content":[],"isError":true}},`+
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad"}},`+
		`{"jsonrpc":"2.0","id":4,"error":{"code":"`+strings.Repeat("x", 10000)+`","message":1}},`+
		`{"jsonrpc":"2.0","id":5,"result":{"structuredContent":{"isError":true},"content":[]}},`+
		`{"jsonrpc":"2.0","id":99,"result":{}},"junk",{"id":1,"result":{"isError":true}}]`))
	require.NoError(t, err)
	s.End(nil, feature.Complete)
	s.Finish(time.Now())
	assert.Equal(t, map[string]string{
		"tools/call ok": "", "tools/call failed": "tool_error", "tools/call refused": "-32602",
		"tools/call odd": "_OTHER", "tools/call nested": "", "notifications/cancelled": "",
		"tools/call unanswered": "no_response",
	}, errorTypes(rec))
}

func TestTheGatewaysEnvelopeEndsWhatItAnswers(t *testing.T) {
	s, rec := traced(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	env := envelope.New(envelope.RateLimited, "Rate limit exceeded").RetryAfter(20).Envelope()
	s.Answered(&env, feature.Rule{Kind: "limit", Name: "per_client"})
	s.Finish(time.Now())
	s.Finish(time.Now()) // once only
	require.Len(t, rec.Ended(), 1)
	span := rec.Ended()[0]
	assert.Equal(t, map[string]string{"tools/call x": "RATE_LIMITED"}, errorTypes(rec))
	assert.Equal(t, "Rate limit exceeded", span.Status().Description)
	require.Len(t, span.Events(), 1)
	assert.Equal(t, "caddy.mcp.envelope", span.Events()[0].Name)
}

func TestAnUntracedRequestCostsNothing(t *testing.T) {
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	s := Start(x, nil)
	assert.Nil(t, s)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	out, changed := s.AppendBody(nil, body)
	assert.False(t, changed)
	assert.Empty(t, out)
	s.Event("e")
	s.Finish(time.Now())
	allocs := testing.AllocsPerRun(100, func() { _ = Start(x, nil) })
	assert.Zero(t, allocs)

	// As the core sees it: no trace (a nil interface, not a nil
	// *Spans), for no allocation.
	var tr feature.Tracer = tracer{newTools()}
	assert.Nil(t, tr.Start(x))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = tr.Start(x) }))
}

// A response ends the span of the request a client takes it for, however
// the server spelled the id back (jsonrpc.MayAnswer): "1" for the
// TypeScript client, 2.5 for the Go client.
func TestAResponseEndsTheSpanOfTheRequestAClientTakesItFor(t *testing.T) {
	s, rec := traced(t, `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"string"}},`+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fraction"}},`+
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"other"}}]`)
	_, err := s.Message(nil, []byte(`[{"jsonrpc":"2.0","id":"1","result":{"content":[],"isError":true}},`+
		`{"jsonrpc":"2.0","id":2.5,"error":{"code":-32602,"message":"bad"}},`+
		`{"jsonrpc":"2.0","id":"three","result":{"content":[]}}]`))
	require.NoError(t, err)
	s.End(nil, feature.Complete)
	s.Finish(time.Now())
	assert.Equal(t, map[string]string{
		"tools/call string": "tool_error", "tools/call fraction": "-32602", "tools/call other": "no_response",
	}, errorTypes(rec))
}

// Each span's name and attributes, by the conventions, whatever the id
// and the method.
func TestEachSpanIsNamedAndDescribedByTheConventions(t *testing.T) {
	s, rec := traced(t, `[`+strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather"}}`,
		`{"jsonrpc":"2.0","id":"a\"b","method":"prompts/get","params":{"name":"review"}}`,
		`{"jsonrpc":"2.0","id":"plain","method":"x/invented"}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"notified"}}`,
	}, ",")+`]`)
	s.Finish(time.Now())
	got := map[string]map[string]string{}
	for _, sp := range rec.Ended() {
		attrs := map[string]string{}
		for _, a := range sp.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		delete(attrs, "error.type")
		delete(attrs, "network.transport")
		delete(attrs, "network.protocol.name")
		delete(attrs, "network.protocol.version")
		got[sp.Name()] = attrs
	}
	assert.Equal(t, map[string]map[string]string{
		"tools/call get_weather": {"mcp.method.name": "tools/call", "jsonrpc.request.id": "1", "gen_ai.tool.name": "get_weather", "gen_ai.operation.name": "execute_tool"},
		"prompts/get review":     {"mcp.method.name": "prompts/get", "jsonrpc.request.id": `a"b`, "gen_ai.prompt.name": "review"},
		"x/invented":             {"mcp.method.name": "x/invented", "jsonrpc.request.id": "plain"},
		"tools/call notified":    {"mcp.method.name": "tools/call", "gen_ai.tool.name": "notified", "gen_ai.operation.name": "execute_tool"},
	}, got)
}

// Each phase the core names is an event of its own, with the time it
// took; the upstream's header is one with its status.
func TestEachPhaseIsAnEventOnTheSpans(t *testing.T) {
	s, rec := traced(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	var tr feature.Trace = s
	for _, p := range []feature.Phase{feature.PhaseSession, feature.PhaseAdmission, feature.PhaseChecks, feature.PhaseEntry, 0, 200} {
		tr.Phase(p, 2*time.Millisecond)
	}
	tr.Upstream(202)
	require.Same(t, s, tr.Answer())
	tr.Finish(time.Now())
	require.Len(t, rec.Ended(), 1)
	var names []string
	for _, e := range rec.Ended()[0].Events() {
		names = append(names, e.Name)
		require.Len(t, e.Attributes, 1)
		if e.Name == "caddy.mcp.upstream.response" {
			assert.Equal(t, int64(202), e.Attributes[0].Value.AsInt64())
		} else {
			assert.Equal(t, 0.002, e.Attributes[0].Value.AsFloat64())
		}
	}
	assert.Equal(t, []string{"caddy.mcp.session", "caddy.mcp.limits", "caddy.mcp.checks", "caddy.mcp.guard", "caddy.mcp.upstream.response"}, names, "a phase unknown is no event")
}
