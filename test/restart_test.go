package test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A stateful server restarted between two calls of one client session (a
// new process on the same port, which knows none of the sessions it held):
// it answers 404 to the session, and the gateway, with sessions, opens a
// new one on the client's behalf and sends the call again. The client's
// next call succeeds, in the same client session, with the session id it
// holds; the Go client's standalone GET stream, which reconnects first,
// comes back too, and the session is not closed under it.

// restartedServers are the stateful servers restarted.
var restartedServers = map[string]func(bin string) mcptest.KillableProgram{
	"go,json": func(bin string) mcptest.KillableProgram { return mcptest.KillableGo{Bin: bin, Stateful: true} },
	"go,resumable": func(bin string) mcptest.KillableProgram {
		return mcptest.KillableGo{Bin: bin, SSE: true, Stateful: true, Events: true}
	},
	"ts,resumable": func(string) mcptest.KillableProgram { return mcptest.KillableTS{Stateful: true, Events: true} },
}

// echoTwiceAcrossARestart calls echo "one", restarts server, and calls echo
// "two" in the same client session through endpoint, with an official
// client; it returns the texts answered and the session ids the client
// held before and after.
// streams receives a value each time the upstream opens a GET stream to
// the gateway.
type echoTwiceAcrossARestart func(t *testing.T, endpoint string, server *mcptest.KillableServer, streams <-chan struct{}) (texts []string, before, after string)

var restartClients = map[string]echoTwiceAcrossARestart{
	"go": func(t *testing.T, endpoint string, server *mcptest.KillableServer, streams <-chan struct{}) ([]string, string, string) {
		session, err := mcp.NewClient(&mcp.Implementation{Name: "restarted", Version: "0"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		require.NoError(t, err)
		defer session.Close()
		echo := func(text string) string {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
			require.NoError(t, err, "the call %q", text)
			require.False(t, res.IsError, "%s", mcptest.TextOf(t, res))
			return mcptest.TextOf(t, res)
		}
		before := session.ID()
		first := echo("one")
		waitFor(t, streams, "the client's standalone stream")
		server.Restart(t)
		// The client's standalone stream broke, and it reconnects before
		// the next call: it meets the 404 of the restarted server first,
		// and would close the session on it.
		waitFor(t, streams, "the standalone stream, reopened")
		second := echo("two")
		return []string{first, second}, before, session.ID()
	},
	"ts": func(t *testing.T, endpoint string, server *mcptest.KillableServer, _ <-chan struct{}) ([]string, string, string) {
		pause := mcptest.NewPause(t)
		go func() {
			select {
			case <-pause.Reached:
				server.Restart(t)
				pause.Resume()
			case <-t.Context().Done():
			}
		}()
		out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
			mcptest.CallToolStep("echo", map[string]any{"text": "one"}),
			pause.Step(),
			mcptest.CallToolStep("echo", map[string]any{"text": "two"}),
		}})
		require.Len(t, out.Results, 3)
		var texts []string
		for _, i := range []int{0, 2} {
			require.True(t, out.Results[i].OK, "step %d: %v", i, out.Results[i].Error)
			res := out.Results[i].CallToolResult(t)
			require.False(t, res.IsError, "%s", mcptest.TextOf(t, res))
			texts = append(texts, mcptest.TextOf(t, res))
		}
		return texts, out.Session.FirstSessionID, out.Session.SessionID
	},
}

func TestARestartedServerKeepsItsClientsSessions(t *testing.T) {
	bin := mcptest.BuildBigServer(t)
	for name, program := range restartedServers {
		for client, echoTwice := range restartClients {
			t.Run(fmt.Sprintf("server=%s,client=%s", name, client), func(t *testing.T) {
				server := mcptest.StartKillable(t, program(bin))
				watched, streams := watchStreams(t, server.URL)
				gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: sessionsSite + mcptest.ProxyTo(watched)})
				const reopened = "caddy_mcp_sessions_reopened_total{}"
				before := mcpMetrics(t, gw.AdminURL)[reopened]
				texts, first, last := echoTwice(t, gw.URL+mcptest.MCPPath, server, streams)
				assert.Equal(t, []string{"one", "two"}, texts)
				assert.Equal(t, first, last, "the client kept its session id")
				assert.GreaterOrEqual(t, mcpMetrics(t, gw.AdminURL)[reopened], before+1)
			})
		}
	}
}

// watchStreams stands between the gateway and upstream, and sends a value
// on streams each time upstream answers a GET with an event stream.
func watchStreams(t *testing.T, upstream string) (string, <-chan struct{}) {
	target, err := url.Parse(upstream)
	require.NoError(t, err)
	streams := make(chan struct{}, 16)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: target.Host}) },
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
				streams <- struct{}{}
			}
			return nil
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // a stream the restart broke
	}
	return mcptest.ServeMCP(t, proxy), streams
}

// waitFor waits for a value on c, for at most 30 s.
func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30 s", what)
	}
}
