package mcptest_test

import (
	"bufio"
	"context"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A stateful server with resumable streams, on either official SDK, killed
// in the middle of a call of work: the stream of the call carried event
// ids, and ends with the process; started again, the server listens at
// the same URL, knows none of the sessions of the process before (404),
// and a new session works.
func TestAKilledServerRestartsOnItsPortWithoutItsSessions(t *testing.T) {
	programs := map[string]mcptest.KillableProgram{
		"go": mcptest.KillableGo{Bin: mcptest.BuildBigServer(t), SSE: true, Stateful: true, Events: true},
		"ts": mcptest.KillableTS{Stateful: true, Events: true},
	}
	for name, program := range programs {
		t.Run(name, func(t *testing.T) {
			server := mcptest.StartKillable(t, program)
			url := server.URL
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			session := initialize(ctx, t, url)

			stream := post(ctx, t, url, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"work","arguments":{},"_meta":{"progressToken":"p"}}}`)
			defer stream.Body.Close()
			require.Equal(t, http.StatusOK, stream.StatusCode)
			media, _, _ := mime.ParseMediaType(stream.Header.Get("Content-Type"))
			require.Equal(t, "text/event-stream", media)
			events := bufio.NewReader(stream.Body)
			progress := nextEvent(t, events, "notifications/progress")
			assert.NotEmpty(t, progress.id, "an event of a resumable stream carries an id")
			select {
			case <-server.Called:
			case <-ctx.Done():
				t.Fatal("the call never reached the server")
			}

			server.Kill()
			rest, err := io.ReadAll(events)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "the stream ends with the process")
			assert.NotContains(t, string(rest), `"result"`, "work never answers")

			server.Restart(t)
			assert.Equal(t, url, server.URL)
			gone := post(ctx, t, url, session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
			_ = gone.Body.Close()
			assert.Equal(t, http.StatusNotFound, gone.StatusCode, "a session of the killed process")
			resume := request(ctx, t, http.MethodGet, url, session, "")
			_ = resume.Body.Close()
			assert.Equal(t, http.StatusNotFound, resume.StatusCode, "a stream of the killed process")

			cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "0"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
			require.NoError(t, err, "a new session")
			defer func() { assert.NoError(t, cs.Close()) }()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}})
			require.NoError(t, err)
			assert.Equal(t, "again", mcptest.TextOf(t, res))
		})
	}
}

// rawProtocolVersion is the version the raw requests speak: the latest
// that has sessions and resumable streams, the one the official clients
// settle on with a stateful server.
const rawProtocolVersion = "2025-11-25"

// initialize opens a session at url with plain HTTP requests and returns
// its id.
func initialize(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	res := post(ctx, t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+
		rawProtocolVersion+`","capabilities":{},"clientInfo":{"name":"mcptest","version":"0"}}}`)
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	session := res.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, session, "a stateful server gives a session id")
	initialized := post(ctx, t, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_ = initialized.Body.Close()
	require.Equal(t, http.StatusAccepted, initialized.StatusCode)
	return session
}

func post(ctx context.Context, t *testing.T, url, session, body string) *http.Response {
	t.Helper()
	return request(ctx, t, http.MethodPost, url, session, body)
}

// oneShot sends each request on a connection of its own: none is taken
// from a pool where it may have been cut by a kill the client has not
// noticed yet.
var oneShot = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// request sends a request of the session (none when "") to url, body
// when it is a POST.
func request(ctx context.Context, t *testing.T, method, url, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", rawProtocolVersion)
	}
	res, err := oneShot.Do(req)
	require.NoError(t, err)
	return res
}

// event is one event of a stream.
type event struct{ id, data string }

// nextEvent reads events until one whose data holds want, and returns it.
func nextEvent(t *testing.T, stream *bufio.Reader, want string) event {
	t.Helper()
	var e event
	for {
		line, err := stream.ReadString('\n')
		require.NoError(t, err, "the stream ended before an event holding %s", want)
		line = strings.TrimRight(line, "\r\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "" && strings.Contains(e.data, want):
			return e
		case line == "":
			e = event{}
		case field == "id":
			e.id = value
		case field == "data":
			e.data += value
		}
	}
}
