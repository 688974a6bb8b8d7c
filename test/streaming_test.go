package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A large tools/call (over stream_above, 16 KiB here) goes to the upstream
// as it arrives, admitted on its head; a body refused once it streams never
// reaches the upstream whole, and its client is answered as a client
// sending the same body in one piece is.

// bodyWatch is an upstream that tells when more than streamedEnough bytes
// of a request's body have reached it, and records how much of each body
// it got, and whether all of it.
type bodyWatch struct {
	mu       sync.Mutex
	bodies   []watchedBody
	streamed chan struct{}
	// ended has each body once the upstream has read all it will get.
	ended chan watchedBody
}

type watchedBody struct {
	n        int
	complete bool
}

// streamedEnough is how much of a body the upstream must have before the
// tests send the rest: more than a body's start, so that the upstream
// holding it shows that the gateway streamed, whatever pieces the kernel
// and the gateway's transport cut the body into.
const streamedEnough = 16 << 10

func startBodyWatch(t *testing.T) (*bodyWatch, string) {
	u := &bodyWatch{streamed: make(chan struct{}, 64), ended: make(chan watchedBody, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, told := 0, false
		buf := make([]byte, 4096)
		var err error
		for err == nil {
			var k int
			k, err = r.Body.Read(buf)
			n += k
			if n > streamedEnough && !told {
				u.streamed <- struct{}{}
				told = true
			}
		}
		complete := err == io.EOF && int64(n) == r.ContentLength
		u.mu.Lock()
		u.bodies = append(u.bodies, watchedBody{n: n, complete: complete})
		u.mu.Unlock()
		u.ended <- watchedBody{n: n, complete: complete}
		if !complete {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}`)
	}))
	t.Cleanup(srv.Close)
	return u, srv.URL
}

// waitEnded waits until the upstream has read all it will get of a body,
// and returns how much that was.
func (u *bodyWatch) waitEnded(t *testing.T) watchedBody {
	t.Helper()
	select {
	case b := <-u.ended:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream is still reading a body")
		return watchedBody{}
	}
}

func (u *bodyWatch) seen() []watchedBody {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]watchedBody(nil), u.bodies...)
}

// waitStreamed waits until more than streamedEnough bytes of a request's
// body have reached the upstream.
func (u *bodyWatch) waitStreamed(t *testing.T) {
	t.Helper()
	select {
	case <-u.streamed:
	case <-time.After(10 * time.Second):
		t.Fatalf("the upstream did not get more than %d bytes of the body while the client was still sending it", streamedEnough)
	}
}

// sendInTwo writes a POST of first+rest on a connection of its own,
// declaring the whole length, with between run after first is sent, and
// reads the answer.
func sendInTwo(t *testing.T, gateway, first, rest string, between func()) (*http.Response, string) {
	t.Helper()
	addr := strings.TrimPrefix(gateway, "http://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(first)+len(rest), first)
	require.NoError(t, err)
	between()
	_, err = io.WriteString(conn, rest)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no answer")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

const (
	streamedHead = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"summarize","arguments":{"text":"`
	streamedTail = `"}}}`
)

var thirtyKiB = strings.Repeat("The gateway reads every call before the server does. ", 30<<10/54)

func TestALargeCallStreamsToTheUpstream(t *testing.T) {
	u, upstream := startBodyWatch(t)
	g := mcptest.StartGateway(t, "mcp {\n\tstream_above 16KiB\n}\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	first := streamedHead + thirtyKiB
	rest := thirtyKiB + streamedTail
	resp, body := sendInTwo(t, g.URL, first, rest, func() { u.waitStreamed(t) })
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}`, body, "the upstream's answer, as it wrote it")
	require.Equal(t, []watchedBody{{n: len(first) + len(rest), complete: true}}, u.seen())
}

// Every way the rest of a streaming body can be refused: the upstream got
// its start, never all of it, and the client the answer a body sent in
// one piece gets.
func TestAStreamingBodyRefusedInItsRestNeverReachesTheUpstreamWhole(t *testing.T) {
	for _, tc := range []struct {
		name, rest string
		status     int
		says       string
	}{
		{"not JSON", thirtyKiB + `\x` + streamedTail, http.StatusBadRequest, "Request body is not valid JSON"},
		{"a second method after the arguments", thirtyKiB + `"},"x":1},"method":"tools/list"}`, http.StatusBadRequest, "ambiguous"},
		{"data after the message", thirtyKiB + streamedTail + `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"other"}}`, http.StatusBadRequest, "Request body is not valid JSON"},
		{"unterminated", thirtyKiB + `"}}`, http.StatusBadRequest, "Request body is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, upstream := startBodyWatch(t)
			g := mcptest.StartGateway(t, "mcp {\n\tstream_above 16KiB\n\trate_limit calls {\n\t\trate 100/1m\n\t}\n}\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
			first := streamedHead + thirtyKiB
			resp, body := sendInTwo(t, g.URL, first, tc.rest, func() { u.waitStreamed(t) })
			assert.Equal(t, tc.status, resp.StatusCode, body)
			assert.Contains(t, body, tc.says)
			got := u.waitEnded(t)
			assert.False(t, got.complete, "the upstream never has the whole body")
			assert.Less(t, got.n, len(first)+len(tc.rest))

			// The same body sent in one piece is answered alike.
			// (Sent with no declared length, it is read whole first.)
			whole, wholeBody := post(t, g.URL+"/mcp", first+tc.rest, chunked)
			assert.Equal(t, resp.StatusCode, whole.StatusCode)
			assert.Equal(t, string(wholeBody), body, "answered as a body read whole is")
		})
	}
}

// A client that goes away halfway leaves the upstream with an incomplete
// request, which it does not run.
func TestAClientLeavingHalfwayLeavesTheUpstreamAnIncompleteBody(t *testing.T) {
	u, upstream := startBodyWatch(t)
	g := mcptest.StartGateway(t, "mcp {\n\tstream_above 16KiB\n}\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	addr := strings.TrimPrefix(g.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, 100<<10, streamedHead+thirtyKiB)
	require.NoError(t, err)
	u.waitStreamed(t)
	require.NoError(t, conn.Close())
	assert.False(t, u.waitEnded(t).complete)
}

// A streaming body too slow is cut after read_body_timeout, and the
// upstream, which had its start, never gets all of it.
func TestAStreamingBodyTooSlowIsCut(t *testing.T) {
	u, upstream := startBodyWatch(t)
	g := mcptest.StartGateway(t, "mcp {\n\tstream_above 16KiB\n\tread_body_timeout 500ms\n}\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	addr := strings.TrimPrefix(g.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, 100<<10, streamedHead+thirtyKiB)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Contains(t, string(b), "Request body did not arrive within 500ms")
	assert.False(t, u.waitEnded(t).complete)
}

// Limits decide on what the whole body says: a name after 60 KiB of
// arguments (read whole) and a name first (streamed) are limited alike, per
// tool.
func TestALargeCallIsLimitedByItsToolWhereverItsNameIs(t *testing.T) {
	_, upstream := startBodyWatch(t)
	g := mcptest.StartGateway(t, "mcp {\n\tstream_above 16KiB\n\trate_limit per_tool {\n\t\trate 1/1h\n\t\tkey {http.mcp.tool}\n\t}\n}\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	args := `{"text":"` + strings.Repeat("a", 60<<10) + `"}`
	nameLast := func(id int, tool string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"arguments":%s,"name":%q}}`, id, args, tool)
	}
	nameFirst := func(id int, tool string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
	}
	for _, tc := range []struct {
		body    string
		limited bool
	}{
		{nameLast(1, "expensive"), false},
		{nameFirst(2, "expensive"), true},
		{nameLast(3, "expensive"), true},
		{nameFirst(4, "cheap"), false},
		{nameLast(5, "cheap"), true},
	} {
		resp, body := post(t, g.URL+"/mcp", tc.body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		if tc.limited {
			assert.Contains(t, string(body), "RATE_LIMITED", tc.body[:60])
		} else {
			assert.Contains(t, string(body), `"text":"done"`, tc.body[:60])
		}
	}
}

// A head the limits refuse is answered once the whole body is in, as a
// body read whole: a malformed rest is refused as not JSON, a valid one as
// limited, with its id.
func TestAStreamingBodyRefusedOnItsHeadIsAnsweredOnTheWholeBody(t *testing.T) {
	u, upstream := startBodyWatch(t)
	g := mcptest.StartGateway(t, "mcp {\n\tstream_above 16KiB\n\trate_limit calls {\n\t\trate 1/1h\n\t}\n}\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	valid := streamedHead + thirtyKiB + thirtyKiB + streamedTail
	resp, _ := post(t, g.URL+"/mcp", valid)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, u.seen(), 1)

	resp, body := post(t, g.URL+"/mcp", valid)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "RATE_LIMITED")
	assert.Contains(t, string(body), `"id":7`)
	resp, body = post(t, g.URL+"/mcp", streamedHead+thirtyKiB+`\x`+streamedTail)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "Request body is not valid JSON")
	assert.Len(t, u.seen(), 1, "nothing refused reached the upstream")
}

// A body refused once it streamed is logged and counted as what the client
// was told, once: not as the upstream failing (its request was aborted for
// the body), nor as a limit a malformed body met on its head.
func TestAStreamingBodyRefusedIsLoggedOnceAsTheClientWasAnswered(t *testing.T) {
	u, upstream := startBodyWatch(t)
	logFile := tempLog(t, "caddy.log")
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Log:  "output file " + logFile + "\nformat json\nlevel DEBUG",
		Site: "mcp {\n\tstream_above 16KiB\n\trate_limit one {\n\t\trate 1/1h\n\t}\n}\nreverse_proxy " + strings.TrimPrefix(upstream, "http://"),
	})
	first := streamedHead + thirtyKiB
	resp, _ := sendInTwo(t, g.URL, first, thirtyKiB+`\x`+streamedTail, func() { u.waitStreamed(t) })
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	// The limit's token was given back; the next call's head is refused by
	// it only because this one spends it, and its rest is malformed.
	resp, _ = post(t, g.URL+"/mcp", first+thirtyKiB+streamedTail)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = post(t, g.URL+"/mcp", first+`\x`+streamedTail)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	var codes []string
	for _, l := range jsonLines(t, logFile) {
		if l["logger"] == handlerLogger {
			code, _ := l["code"].(string)
			codes = append(codes, code)
		}
	}
	assert.Equal(t, []string{"VALIDATION_ERROR", "VALIDATION_ERROR"}, codes, "one line per answer, with the code the client got")
}

// Under stream_above (256 KiB by default) a call is read whole before it goes
// on: one whose end is malformed never reaches the upstream at all, where
// the same call streamed would have (TestAStreamingBodyRefusedInItsRest...).
func TestACallUnderStreamAboveIsReadWholeFirst(t *testing.T) {
	u, upstream := startBodyWatch(t)
	g := mcptest.StartGateway(t, "mcp\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	resp, body := post(t, g.URL+"/mcp", streamedHead+thirtyKiB+thirtyKiB+`\x`+streamedTail)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	resp, body = post(t, g.URL+"/mcp", streamedHead+thirtyKiB+thirtyKiB+streamedTail)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	bodies := u.seen()
	require.Len(t, bodies, 1, "only the valid call reached the upstream")
	assert.True(t, bodies[0].complete)
}
