package test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Spans per MCP message, exported by Caddy's tracing to a real OTLP
// receiver (mcptest.TraceReceiver), from a gateway in front of an
// official Go SDK server whose tools say what trace context reached them.

// traced starts a Go SDK server (stateless, JSON answers) with the tools
// "meta" (its text: the traceparent the server read from params._meta)
// and "fail" (a result with isError), and a gateway with tracing and mcp
// holding rest, in front of it. It returns the MCP endpoint.
func traced(t *testing.T, rest string) (*mcptest.OTLPReceiver, string) {
	t.Helper()
	rec := mcptest.TraceReceiver(t)
	s := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "meta"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "traceparent=" + tp}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil, nil
	})
	upstream := mcptest.ServeMCP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	gw := mcptest.StartGateway(t, "tracing {\n\tspan http\n}\nmcp {\n"+rest+"\n}\n"+mcptest.ProxyTo(upstream))
	return rec, gw.URL + mcptest.MCPPath
}

// newTraceID is a random W3C trace id, and the traceparent header of a
// client span in it.
func newTraceID(t *testing.T) (traceID, traceparent string) {
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	traceID = hex.EncodeToString(b)
	return traceID, "00-" + traceID + "-00f067aa0ba902b7-01"
}

func spanNamed(t *testing.T, spans []*mcptest.Span, name string) *mcptest.Span {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return nil
}

func call(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
}

func TestEachToolCallHasASpanWhoseContextReachesTheServer(t *testing.T) {
	rec, endpoint := traced(t, "")
	traceID, traceparent := newTraceID(t)
	resp, body := post(t, endpoint, call(7, "meta"), withHeader("traceparent", traceparent, "Mcp-Protocol-Version", "2025-06-18"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	spans := rec.Trace(t, traceID, "http", "tools/call meta")
	httpSpan, span := spanNamed(t, spans, "http"), spanNamed(t, spans, "tools/call meta")
	assert.Equal(t, httpSpan.SpanID, span.ParentSpanID, "a child of Caddy's HTTP span")
	assert.Equal(t, "SPAN_KIND_SERVER", span.Kind.String())
	for k, v := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "meta", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "7", "mcp.protocol.version": "2025-06-18", "network.transport": "tcp",
	} {
		assert.Equal(t, v, span.Attributes[k], k)
	}
	assert.False(t, span.StatusError)
	assert.NotContains(t, span.Attributes, "error.type")
	assert.Contains(t, string(body), "traceparent=00-"+traceID+"-"+span.SpanID+"-01",
		"the Go SDK server read the message's span from params._meta")
}

func TestAToolsIsErrorAndTheGatewaysEnvelopesFailTheirSpans(t *testing.T) {
	rec, endpoint := traced(t, "\trate_limit per_client {\n\t\trate 2/1h\n\t}")
	traceID, traceparent := newTraceID(t)
	for i, tool := range []string{"fail", "meta", "meta"} {
		resp, body := post(t, endpoint, call(i+1, tool), withHeader("traceparent", traceparent))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	}
	spans := rec.Until(t, traceID, func(spans []*mcptest.Span) bool { return len(spans) == 6 }) // three HTTP spans, three calls
	var limited *mcptest.Span
	for _, s := range spans {
		switch {
		case s.Name == "tools/call fail":
			assert.Equal(t, "tool_error", s.Attributes["error.type"])
			assert.True(t, s.StatusError)
		case s.Name == "tools/call meta" && s.Attributes["error.type"] != "":
			limited = s
		}
	}
	require.NotNil(t, limited, "the third call, refused")
	assert.Equal(t, "RATE_LIMITED", limited.Attributes["error.type"])
	assert.True(t, limited.StatusError)
	assert.True(t, strings.HasPrefix(limited.StatusMessage, "Rate limit exceeded"), limited.StatusMessage)
	require.Len(t, limited.Events, 2)
	assert.Equal(t, "caddy.mcp.limits", limited.Events[0].Name, "the limits decided, and how long it took")
	assert.NotEmpty(t, limited.Events[0].Attributes["caddy.mcp.duration_seconds"])
	ev := limited.Events[1]
	assert.Equal(t, "caddy.mcp.envelope", ev.Name)
	assert.Equal(t, map[string]string{"caddy.mcp.envelope.code": "RATE_LIMITED", "caddy.mcp.rule.kind": "limit", "caddy.mcp.rule.name": "per_client", "caddy.mcp.retry_after": ev.Attributes["caddy.mcp.retry_after"]}, ev.Attributes)
	assert.NotEmpty(t, ev.Attributes["caddy.mcp.retry_after"])
}

func TestAClientsMetaTraceparentIsTheParentAndTheHTTPSpanALink(t *testing.T) {
	rec, endpoint := traced(t, "")
	traceID, traceparent := newTraceID(t)
	callerTrace, callerParent := newTraceID(t)
	callerParent = strings.Replace(callerParent, "00f067aa0ba902b7", "1111111111111111", 1)
	body := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"_meta":{"traceparent":"` + callerParent + `","progressToken":3},"name":"meta","arguments":{}}}`
	resp, got := post(t, endpoint, body, withHeader("traceparent", traceparent))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)

	httpSpan := spanNamed(t, rec.Trace(t, traceID, "http"), "http")
	span := spanNamed(t, rec.Trace(t, callerTrace, "tools/call meta"), "tools/call meta")
	assert.Equal(t, "1111111111111111", span.ParentSpanID, "the message's own context is its parent")
	assert.Equal(t, []string{httpSpan.SpanID}, span.Links, "the HTTP request's, a link")
	assert.Equal(t, "a", span.Attributes["jsonrpc.request.id"])
	assert.Contains(t, string(got), "traceparent=00-"+callerTrace+"-"+span.SpanID+"-01", "the server continues the caller's trace")
}

func TestABatchOfTwoCallsHasTwoSpansEachEndedByItsResponse(t *testing.T) {
	rec, endpoint := traced(t, "")
	traceID, traceparent := newTraceID(t)
	batch := "[" + call(1, "meta") + "," + call(2, "fail") + "]"
	resp, body := post(t, endpoint, batch, withHeader("traceparent", traceparent, "Mcp-Protocol-Version", "2025-03-26"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	spans := rec.Trace(t, traceID, "http", "tools/call meta", "tools/call fail")
	httpSpan, meta, fail := spanNamed(t, spans, "http"), spanNamed(t, spans, "tools/call meta"), spanNamed(t, spans, "tools/call fail")
	for _, s := range []*mcptest.Span{meta, fail} {
		assert.Equal(t, httpSpan.SpanID, s.ParentSpanID)
	}
	assert.Empty(t, meta.Attributes["error.type"])
	assert.Equal(t, "tool_error", fail.Attributes["error.type"])
	assert.Equal(t, "1", meta.Attributes["jsonrpc.request.id"])
	assert.Contains(t, string(body), "traceparent=00-"+traceID+"-"+meta.SpanID+"-01", "each message went upstream with its own span")
}

func TestABatchRefusedWholeHasASpanPerMessage(t *testing.T) {
	rec, endpoint := traced(t, "\trate_limit per_client {\n\t\trate 1/1h\n\t\tburst 1\n\t}")
	traceID, traceparent := newTraceID(t)
	batch := "[" + call(1, "meta") + "," + call(2, "fail") + `,{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}]`
	resp, body := post(t, endpoint, batch, withHeader("traceparent", traceparent, "Mcp-Protocol-Version", "2025-03-26"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	spans := rec.Trace(t, traceID, "tools/call meta", "tools/call fail", "notifications/progress")
	for _, s := range spans {
		if s.Name == "http" {
			continue
		}
		assert.Equal(t, "RATE_LIMITED", s.Attributes["error.type"], "%s: the batch was refused as a whole (two calls, one token)", s.Name)
	}
}
