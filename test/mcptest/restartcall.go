package mcptest

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EchoAcrossRestart calls the tool echo "one" of server through endpoint
// with an official client (client: "go" or "ts"), restarts server, and
// calls echo "two" in the same client session; it returns the texts
// answered, and the session ids the client held once connected and at
// the end. The call after the restart fails the test if it is not a
// result. streams (see WatchStreams) receives a value each time the
// upstream opens a GET stream: the Go client's standalone stream breaks
// with the restart and reconnects first, and its next call is made only
// once that stream is open again (nil: the server is stateless, and
// there is no such stream).
func EchoAcrossRestart(t *testing.T, client, endpoint string, server *KillableServer, streams <-chan struct{}) (texts []string, first, last string) {
	t.Helper()
	switch client {
	case "go":
		return echoAcrossRestartGo(t, endpoint, server, streams)
	case "ts":
		return echoAcrossRestartTS(t, endpoint, server)
	}
	t.Fatalf("mcptest: no client %q", client)
	return nil, "", ""
}

func echoAcrossRestartGo(t *testing.T, endpoint string, server *KillableServer, streams <-chan struct{}) ([]string, string, string) {
	session, err := mcp.NewClient(&mcp.Implementation{Name: "restarted", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("mcptest: connect: %v", err)
	}
	defer session.Close()
	echo := func(text string) string {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			t.Fatalf("mcptest: the call %q: %v %+v", text, err, res)
		}
		return TextOf(t, res)
	}
	first := session.ID()
	one := echo("one")
	if streams == nil {
		server.Restart(t)
		return []string{one, echo("two")}, first, session.ID()
	}
	wait(t, streams, "the client's standalone stream")
	server.Restart(t)
	// It meets the 404 of the restarted server first, which would close
	// the client's session.
	wait(t, streams, "the standalone stream, reopened")
	two := echo("two")
	return []string{one, two}, first, session.ID()
}

func echoAcrossRestartTS(t *testing.T, endpoint string, server *KillableServer) ([]string, string, string) {
	pause := NewPause(t)
	go func() {
		select {
		case <-pause.Reached:
			server.Restart(t)
			pause.Resume()
		case <-t.Context().Done():
		}
	}()
	out := RunTSClient(t, TSScript{URL: endpoint, Steps: []TSStep{
		CallToolStep("echo", map[string]any{"text": "one"}),
		pause.Step(),
		CallToolStep("echo", map[string]any{"text": "two"}),
	}})
	if len(out.Results) != 3 {
		t.Fatalf("mcptest: %d results", len(out.Results))
	}
	var texts []string
	for _, i := range []int{0, 2} {
		if !out.Results[i].OK {
			t.Fatalf("mcptest: step %d: %v", i, out.Results[i].Error)
		}
		res := out.Results[i].CallToolResult(t)
		if res.IsError {
			t.Fatalf("mcptest: step %d: %s", i, TextOf(t, res))
		}
		texts = append(texts, TextOf(t, res))
	}
	return texts, out.Session.FirstSessionID, out.Session.SessionID
}

// WatchStreams stands between a gateway and upstream (its endpoint), and
// sends a value on streams each time upstream answers a GET with 200 (an
// event stream opened). It returns the endpoint to proxy to.
func WatchStreams(t testing.TB, upstream string) (endpoint string, streams <-chan struct{}) {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{}, 16)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: target.Host}) },
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
				opened <- struct{}{}
			}
			return nil
		},
		// Each request on a connection of its own: a connection kept from
		// the process before the restart, which the kill closed, would be
		// taken for the new process's while its close is not yet read, and
		// the request sent on it (the gateway's initialize that reopens the
		// session) would break unanswered.
		Transport: BodyFirst(&http.Transport{DisableKeepAlives: true}),
		// While the server restarts, nothing listens on its port: a
		// gateway in front of it finds its connection refused, and is not
		// answered 502, as the proxy answers by default (a 502 the gateway
		// passes on, and on which the Go SDK's client closes its session
		// when it answers its GET). The connection is closed unanswered
		// instead, which the gateway takes for an upstream out of reach
		// too.
		ErrorHandler:  func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // a stream the restart broke
	}
	return ServeMCP(t, proxy), opened
}
