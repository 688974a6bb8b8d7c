package mcptest

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// Clients are the official clients KillMidCall drives.
var Clients = []string{"go", "ts"}

// KillMidCall calls the tool work of server (which never answers) through
// endpoint with an official client (client: "go" or "ts"), asking for
// progress; kills the server once the call reached it and, with
// afterProgress, once the client had the progress notification (the
// stream's first event); and returns the envelope of the result the
// client took for the call, and how long after the kill it took it. It
// fails the test if the client took no result within 30 s.
func KillMidCall(t *testing.T, client, endpoint string, server *KillableServer, afterProgress bool) (envelope.Parsed, time.Duration) {
	t.Helper()
	got, progressed := make(chan envelope.Parsed, 1), make(chan struct{}, 1)
	go callWork(t, client, endpoint, progressed, got)
	wait(t, server.Called, "the call never reached the server")
	if afterProgress {
		wait(t, progressed, "the progress notification never reached the client")
	}
	killed := time.Now()
	server.Kill()
	select {
	case env, ok := <-got:
		if !ok {
			t.Fatal("mcptest: the client took no result for the call")
		}
		return env, time.Since(killed)
	case <-time.After(30 * time.Second):
		t.Fatal("mcptest: the client took no result within 30 s of the kill")
	}
	return envelope.Parsed{}, 0
}

func wait(t *testing.T, c <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatal("mcptest: " + why)
	}
}

// callWork calls work with client, signals progressed at its progress
// notification, and sends the envelope of its result on got, or closes got
// (the test failed).
func callWork(t *testing.T, client, endpoint string, progressed chan<- struct{}, got chan<- envelope.Parsed) {
	signal := func() {
		select {
		case progressed <- struct{}{}:
		default:
		}
	}
	var res *mcp.CallToolResult
	switch client {
	case "go":
		res = callWorkGo(t, endpoint, signal)
	case "ts":
		res = callWorkTS(t, endpoint, signal)
	default:
		t.Errorf("mcptest: no client %q", client)
	}
	if res == nil || !res.IsError {
		t.Errorf("mcptest: the call's result is no error: %+v", res)
		close(got)
		return
	}
	env, err := envelope.Parse(TextOf(t, res))
	if err != nil {
		t.Errorf("mcptest: the result is no envelope: %v", err)
		close(got)
		return
	}
	got <- env
}

func callWorkGo(t *testing.T, endpoint string, signal func()) *mcp.CallToolResult {
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { signal() }}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "killed", Version: "0"}, opts).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Errorf("mcptest: connect: %v", err)
		return nil
	}
	defer session.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "work", Meta: mcp.Meta{"progressToken": "p"}})
	if err != nil {
		t.Errorf("mcptest: the call must come back as a result: %v", err)
	}
	return res
}

func callWorkTS(t *testing.T, endpoint string, signal func()) *mcp.CallToolResult {
	progress := NewSignal(t)
	go func() {
		for range progress.Reached {
			signal()
		}
	}()
	step := CallToolStep("work", map[string]any{})
	step.Progress, step.TimeoutMS, step.ProgressURL = true, 30000, progress.URL
	out := RunTSClient(t, TSScript{URL: endpoint, Steps: []TSStep{step}})
	if len(out.Results) != 1 || !out.Results[0].OK {
		t.Errorf("mcptest: the call must come back as a result: %+v", out.Results)
		return nil
	}
	return out.Results[0].CallToolResult(t)
}
