package demoserver

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func connectInMemory(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := t.Context()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New().Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, cs.Close())
		_ = ss.Wait()
	})
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.Len(t, res.Content, 1)
	tc, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content is %T", res.Content[0])
	return tc.Text
}

func TestTools(t *testing.T) {
	progress := make(chan *mcp.ProgressNotificationParams, 10)
	cs := connectInMemory(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	})
	ctx := t.Context()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	assert.Equal(t, []string{"add", "count", "echo", "slow"}, names)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "héllo"}})
	require.NoError(t, err)
	assert.Equal(t, "héllo", text(t, res))

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 0.1, "b": 0.2}})
	require.NoError(t, err)
	assert.Equal(t, "0.30000000000000004", text(t, res))
	assert.Equal(t, map[string]any{"sum": 0.30000000000000004}, res.StructuredContent)

	// Default interval_ms (100) between the 2 steps.
	start := time.Now()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "count",
		Arguments: map[string]any{"to": 2},
		Meta:      mcp.Meta{"progressToken": 7},
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), DefaultCountIntervalMS*time.Millisecond)
	assert.Equal(t, "counted to 2", text(t, res))
	for i := 1; i <= 2; i++ {
		select {
		case p := <-progress:
			assert.Equal(t, float64(i), p.Progress)
			assert.Equal(t, float64(2), p.Total)
		case <-ctx.Done():
			t.Fatal("missing progress notification")
		}
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 0}})
	require.NoError(t, err)
	assert.Equal(t, "done after 0 ms", text(t, res))

	for _, args := range []map[string]any{{"to": 0}, {"to": 101}, {}, {"to": 1, "interval_ms": -1}, {"to": 1, "extra": 1}} {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: args})
		require.NoError(t, err, "%v", args)
		assert.True(t, res.IsError, "count %v must be rejected", args)
	}
}

func TestHandlersRespectCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x"}}

	_, _, err := slow(ctx, req, SlowInput{MS: 600000})
	assert.True(t, errors.Is(err, context.Canceled), "slow: %v", err)

	_, _, err = count(ctx, req, CountInput{To: 100, IntervalMS: 10000})
	assert.True(t, errors.Is(err, context.Canceled), "count: %v", err)

	res, _, err := count(t.Context(), req, CountInput{To: 3, IntervalMS: 0})
	require.NoError(t, err)
	assert.Equal(t, "counted to 3", text(t, res))
}
