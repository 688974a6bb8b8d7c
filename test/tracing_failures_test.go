package test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The spans of calls that fail on the way: each ends failed, with the
// envelope the gateway wrote, and shows where the time went.

// failing is an upstream for the tracing tests: an official Go SDK server
// (stateless, answering with event streams) with the tools "progress"
// (two progress notifications, then its result) and "hang" (no answer
// until its request ends), in front of which a request with the header
// X-Fail answers as it says: "500" an error page, "break" a stream that
// breaks after its first event. entered is told each call of hang.
func failing(t *testing.T) (upstream string, entered <-chan struct{}) {
	s := mcp.NewServer(&mcp.Implementation{Name: "failing", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := range 2 {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 2})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	in, release := make(chan struct{}, 4), make(chan struct{})
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		in <- struct{}{}
		select {
		case <-ctx.Done(): // a stateless server's call is not cancelled
		case <-release:
		}
		return nil, nil, ctx.Err()
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	defer t.Cleanup(func() { close(release) }) // before the server's: it waits for its calls
	return mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Fail") {
		case "500":
			http.Error(w, "internal error", http.StatusInternalServerError)
		case "break":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		default:
			sdk.ServeHTTP(w, r)
		}
	})), in
}

// failedSpan is the span of the one message of traceID's request, once
// it ended with an error.type.
func failedSpan(t *testing.T, rec *mcptest.OTLPReceiver, traceID, name string) *mcptest.Span {
	t.Helper()
	spans := rec.Until(t, traceID, func(spans []*mcptest.Span) bool {
		for _, s := range spans {
			if s.Name == name {
				return true
			}
		}
		return false
	})
	return spanNamed(t, spans, name)
}

func TestAnSSEAnswerWithProgressEndsItsSpanAtItsResult(t *testing.T) {
	rec := mcptest.TraceReceiver(t)
	upstream, _ := failing(t)
	gw := mcptest.StartGateway(t, "tracing {\n\tspan http\n}\nmcp\n"+mcptest.ProxyTo(upstream))
	traceID, traceparent := newTraceID(t)
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"progress","arguments":{},"_meta":{"progressToken":1}}}`
	resp, got := post(t, gw.URL+mcptest.MCPPath, body, withHeader("traceparent", traceparent))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
	assert.Contains(t, string(got), "notifications/progress")
	span := failedSpan(t, rec, traceID, "tools/call progress")
	assert.False(t, span.StatusError, "%+v", span)
	assert.Empty(t, span.Attributes["error.type"])
	assert.Equal(t, "caddy.mcp.upstream.response", span.Events[0].Name)
	assert.Equal(t, "200", span.Events[0].Attributes["http.response.status_code"])
}

func TestUpstreamFailuresEndTheSpansWithTheGatewaysEnvelope(t *testing.T) {
	rec := mcptest.TraceReceiver(t)
	upstream, _ := failing(t)
	gw := mcptest.StartGateway(t, "tracing {\n\tspan http\n}\nmcp\n"+mcptest.ProxyTo(upstream))
	for fail, code := range map[string]string{"500": "INTERNAL_ERROR", "break": "HANDOFF_UPSTREAM_UNAVAILABLE"} {
		traceID, traceparent := newTraceID(t)
		resp, got := post(t, gw.URL+mcptest.MCPPath, call(9, "progress"), withHeader("traceparent", traceparent, "X-Fail", fail))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
		span := failedSpan(t, rec, traceID, "tools/call progress")
		assert.True(t, span.StatusError, fail)
		assert.Equal(t, code, span.Attributes["error.type"], "%s: %s", fail, got)
	}
}

func TestAFullQueueEndsTheSpanAfterItsWait(t *testing.T) {
	rec := mcptest.TraceReceiver(t)
	upstream, entered := failing(t)
	gw := mcptest.StartGateway(t, "tracing {\n\tspan http\n}\nmcp {\n\tconcurrency {\n\t\tmax 1\n\t\tqueue 1\n\t\tqueue_timeout 100ms\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	endpoint := gw.URL + mcptest.MCPPath

	postAsync(t, endpoint, call(1, "hang")) // answered once the test ends
	<-entered                               // it holds the guard's one place
	busy, busyParent := newTraceID(t)
	resp, got := post(t, endpoint, call(2, "progress"), withHeader("traceparent", busyParent))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)

	span := failedSpan(t, rec, busy, "tools/call progress")
	assert.Equal(t, "SERVER_BUSY", span.Attributes["error.type"])
	names := []string{}
	for _, e := range span.Events {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"caddy.mcp.guard", "caddy.mcp.envelope"}, names, "it waited in the queue, then was refused")
	wait, err := strconv.ParseFloat(span.Events[0].Attributes["caddy.mcp.duration_seconds"], 64)
	require.NoError(t, err)
	assert.Positive(t, wait)
	assert.Equal(t, "guard", span.Events[1].Attributes["caddy.mcp.rule.kind"])
}

func TestATimeoutEndsTheSpanWithItsEnvelope(t *testing.T) {
	rec := mcptest.TraceReceiver(t)
	upstream, _ := failing(t)
	gw := mcptest.StartGateway(t, "tracing {\n\tspan http\n}\nmcp {\n\ttools {\n\t\ttimeout hang 300ms\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	hung, parent := newTraceID(t)
	resp, got := post(t, gw.URL+mcptest.MCPPath, call(1, "hang"), withHeader("traceparent", parent))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
	span := failedSpan(t, rec, hung, "tools/call hang")
	assert.Equal(t, "TIMEOUT", span.Attributes["error.type"])
	assert.True(t, span.StatusError)
}
