// Package demoserver is a tiny, deterministic MCP server built on the official
// Go SDK. It is used by the demo command (examples/demo) and by integration
// tests that put Caddy in front of an MCP server.
//
// Tools:
//
//   - echo {text string}: returns one text content equal to text.
//   - add {a, b number}: returns the sum as text (formatted with
//     strconv.FormatFloat 'g', e.g. "5" or "0.30000000000000004") and as
//     structured output {"sum": <number>}.
//   - count {to int (1..100), interval_ms int (0..10000, default 100)}: for
//     each step 1..to sends a notifications/progress (progress=step,
//     total=to, message "step i/to") if the request carried a progressToken,
//     sleeping interval_ms between steps (not after the last one), then
//     returns "counted to N": the one tool whose SSE response carries
//     several events spread over time. Cancellation of the request context
//     aborts it.
//   - slow {ms int (0..600000)}: waits ms milliseconds (aborted by context
//     cancellation) then returns "done after N ms".
//
// Invalid arguments (missing/out-of-range) are rejected by input schema
// validation before the handler runs and come back as a tool error
// (isError: true), not a JSON-RPC error. An unknown tool is a JSON-RPC error
// -32602.
//
// Transport notes (Go SDK v1.8.0 defaults, as served by Handler): every POST
// carrying a request (initialize included) is answered with
// text/event-stream, even for echo; notifications and responses get 202. The
// handler context of a tool is cancelled by notifications/cancelled, not by
// the client aborting its POST, and a session DELETE waits for running
// handlers.
package demoserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name and Version identify the demo server in the MCP initialize handshake.
const (
	Name    = "caddy-mcp-demo"
	Version = "0.1.0"
)

// EchoInput is the argument of the echo tool.
type EchoInput struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

// AddInput is the argument of the add tool.
type AddInput struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

// AddOutput is the structured output of the add tool.
type AddOutput struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

// CountInput is the argument of the count tool.
type CountInput struct {
	To         int `json:"to"`
	IntervalMS int `json:"interval_ms,omitempty"`
}

// SlowInput is the argument of the slow tool.
type SlowInput struct {
	MS int `json:"ms"`
}

// DefaultCountIntervalMS is the default interval_ms of the count tool.
const DefaultCountIntervalMS = 100

func intSchema(desc string, min, max float64) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "integer", Description: desc, Minimum: &min, Maximum: &max}
}

// New returns the demo MCP server with its tools registered.
func New() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Version: Version}, nil)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Description: "Returns the given text unchanged.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, in EchoInput) (*mcp.CallToolResult, any, error) {
		return textResult(in.Text), nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "add",
		Description: "Adds two numbers.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, in AddInput) (*mcp.CallToolResult, AddOutput, error) {
		sum := in.A + in.B
		return textResult(strconv.FormatFloat(sum, 'g', -1, 64)), AddOutput{Sum: sum}, nil
	})

	countSchema := &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"to":          intSchema("count from 1 to this number", 1, 100),
			"interval_ms": intSchema("milliseconds to wait between steps", 0, 10000),
		},
		Required:             []string{"to"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	countSchema.Properties["interval_ms"].Default = json.RawMessage(strconv.Itoa(DefaultCountIntervalMS))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "count",
		Description: "Counts from 1 to `to`, sending a progress notification per step (if a progressToken was given) and sleeping interval_ms between steps.",
		InputSchema: countSchema,
	}, count)

	slowSchema := &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"ms": intSchema("milliseconds to wait", 0, 600000),
		},
		Required:             []string{"ms"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "slow",
		Description: "Waits ms milliseconds, then answers.",
		InputSchema: slowSchema,
	}, slow)

	return s
}

func count(ctx context.Context, req *mcp.CallToolRequest, in CountInput) (*mcp.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	interval := time.Duration(in.IntervalMS) * time.Millisecond
	for i := 1; i <= in.To; i++ {
		if token != nil {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(i),
				Total:         float64(in.To),
				Message:       fmt.Sprintf("step %d/%d", i, in.To),
			})
			if err != nil {
				return nil, nil, fmt.Errorf("sending progress: %w", err)
			}
		}
		if i < in.To {
			if err := sleep(ctx, interval); err != nil {
				return nil, nil, err
			}
		}
	}
	return textResult(fmt.Sprintf("counted to %d", in.To)), nil, nil
}

func slow(ctx context.Context, _ *mcp.CallToolRequest, in SlowInput) (*mcp.CallToolResult, any, error) {
	if err := sleep(ctx, time.Duration(in.MS)*time.Millisecond); err != nil {
		return nil, nil, err
	}
	return textResult(fmt.Sprintf("done after %d ms", in.MS)), nil, nil
}

// Handler returns a Streamable HTTP handler serving New() (stateful sessions,
// the SDK defaults). Mount it wherever you like (the tests use /mcp); the
// handler does not look at the path.
func Handler() http.Handler {
	s := New()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// sleep waits d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
