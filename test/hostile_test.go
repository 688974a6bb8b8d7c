package test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// nanCall is a tools/call whose arguments hold NaN: not JSON, but a call to
// a Python server.
const nanCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"x":NaN,"y":-Infinity}}}`

// Finding 1: a body the gateway could not inspect used to be forwarded
// uninspected when its Content-Type did not "claim JSON" exactly, and a
// Python server ran it: the limit and the guard were walked around.
func TestContentTypeGamesDoNotWalkAroundALimit(t *testing.T) {
	up := startUpstream(t, pythonContentType)
	g := mcptest.StartGateway(t, `mcp {
	rate_limit one {
		rate 1/1h
	}
}
reverse_proxy `+up.addr)
	endpoint := g.URL + "/mcp"

	resp, _ := post(t, endpoint, wire.ToolCall("first", "slow"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, up.received.Load(), "the first call spends the only token")

	for _, ct := range []string{"text/plain, application/json", "application/json, text/plain", "text/plain;x=1, application/json", ""} {
		resp, body := post(t, endpoint, nanCall, withHeader("Content-Type", ct))
		assert.Equal(t, http.StatusOK, resp.StatusCode, "Content-Type %q", ct)
		assert.Equal(t, "RATE_LIMITED", wire.Outcome(body), "Content-Type %q: a body with NaN is a call, and is limited", ct)
	}
	// Bodies the gateway cannot read at all are refused while a limit could
	// apply to them, whatever they claim to be.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(wire.ToolCall("gz", "slow")))
	require.NoError(t, zw.Close())
	cases := []struct {
		name   string
		body   string
		header []string
		status int
	}{
		{"single quotes as text/plain", `{'jsonrpc':'2.0','id':1,'method':'tools/call'}`, []string{"Content-Type", "text/plain"}, http.StatusBadRequest},
		{"gzip body", gz.String(), []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, http.StatusUnsupportedMediaType},
		{"JSON body declared gzip", wire.ToolCall("enc", "slow"), []string{"Content-Type", "application/json", "Content-Encoding", "identity", "Content-Encoding", "gzip"}, http.StatusUnsupportedMediaType},
	}
	for _, c := range cases {
		resp, body := post(t, endpoint, c.body, withHeader(c.header...))
		assert.Equal(t, c.status, resp.StatusCode, "%s: %s", c.name, body)
		env, err := wire.ErrorEnvelope(body)
		require.NoError(t, err, c.name)
		assert.Equal(t, envelope.ValidationError, env.Code, c.name)
		assert.Contains(t, env.Message, "this server reads every request before it runs", c.name)
	}
	assert.EqualValues(t, 1, up.received.Load(), "nothing after the first call reached the upstream")
}

func TestContentTypeGamesDoNotWalkAroundTheGuard(t *testing.T) {
	up := startUpstream(t, pythonContentType, holdAll)
	g := mcptest.StartGateway(t, `mcp {
	concurrency {
		max 1
	}
}
reverse_proxy `+up.addr)
	endpoint := g.URL + "/mcp"

	results := make(chan string, 6)
	for i := range 6 {
		ct := []string{"text/plain, application/json", "application/json, text/plain"}[i%2]
		postAsync(t, endpoint, nanCall, withHeader("Content-Type", ct), into(results))
	}
	up.waitHeld(t, 1)
	for range 5 {
		assert.Equal(t, "SERVER_BUSY", receive(t, results))
	}
	up.releaseAll()
	assert.Equal(t, "done", receive(t, results))
	assert.EqualValues(t, 1, up.calls.peak.Load(), "one call at a time reached the upstream")
}

// A tools policy governs what a body may call as a limit does: a body the
// gateway cannot read (compressed for a server that decodes it, or not JSON
// for one that reads it leniently) could call a denied tool, and is refused.
func TestBodyGamesDoNotWalkAroundTheToolPolicy(t *testing.T) {
	up := startUpstream(t, pythonContentType)
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\nreverse_proxy "+up.addr)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(wire.ToolCall("gz", "admin_reset")))
	require.NoError(t, zw.Close())
	for _, c := range []struct {
		name, body string
		header     []string
		status     int
	}{
		{"gzip body", gz.String(), []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, http.StatusUnsupportedMediaType},
		{"single quotes as text/plain", `{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':'admin_reset'}}`, []string{"Content-Type", "text/plain"}, http.StatusBadRequest},
	} {
		resp, body := post(t, g.URL+"/mcp", c.body, withHeader(c.header...))
		assert.Equal(t, c.status, resp.StatusCode, "%s: %s", c.name, body)
		assert.Contains(t, string(body), "VALIDATION_ERROR", c.name)
	}
	assert.Zero(t, up.received.Load(), "nothing reached the upstream")
}

// A method the gateway does not read (PUT, or "post", which a lenient
// server takes for a POST) could carry a call it would not admit: it is
// refused while anything governs calls, and passes while nothing does.
func TestOtherMethodsDoNotWalkAroundAPolicy(t *testing.T) {
	up := startUpstream(t, pythonContentType)
	g := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\nreverse_proxy "+up.addr)
	for _, method := range []string{http.MethodPut, "post", http.MethodPatch} {
		req, err := http.NewRequestWithContext(t.Context(), method, g.URL+"/mcp", strings.NewReader(wire.ToolCall("m", "admin_reset")))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s: %s", method, body)
		assert.Equal(t, "GET, POST, DELETE", resp.Header.Get("Allow"))
		assert.Contains(t, string(body), "VALIDATION_ERROR", method)
	}
	assert.Zero(t, up.received.Load(), "nothing reached the upstream")

	g.Reload(t, "mcp\nreverse_proxy "+up.addr)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, g.URL+"/mcp", strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := mcptest.ResendingClient().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.NotContains(t, string(body), "is not one this MCP endpoint takes", "nothing governs calls: the upstream answers the PUT itself")
}

func TestBodyNotJSONPassesToTheUpstreamWhenNothingLimitsIt(t *testing.T) {
	up := startUpstream(t, pythonContentType)
	g := mcptest.StartGateway(t, "mcp\nreverse_proxy "+up.addr)
	resp, _ := post(t, g.URL+"/mcp", "hello", withHeader("Content-Type", "text/plain"))
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "the upstream answers in its own words")
	assert.Zero(t, up.received.Load())
}

// Finding 2: a batch took one place in the guard while the upstream ran all
// its calls at once.
func TestBatchTakesOnePlacePerCall(t *testing.T) {
	up := startUpstream(t, holdAll)
	g := mcptest.StartGateway(t, `mcp {
	max_batch 64
	concurrency {
		max 3
	}
}
reverse_proxy `+up.addr)
	endpoint := g.URL + "/mcp"

	held := postAsync(t, endpoint, wire.Batch(1, 2, "a"))
	require.Equal(t, 2, up.nextHeld(t))
	_, body := post(t, endpoint, wire.Batch(10, 2, "a"))
	answers, err := wire.Answers(body)
	require.NoError(t, err, "%s", body)
	require.Len(t, answers, 2, "each request of the refused batch is answered")
	assert.Equal(t, "SERVER_BUSY", wire.Outcome(answers[0]), "two places asked, one free: the batch waits for none and is shed")

	single := postAsync(t, endpoint, wire.ToolCall("single", "a"))
	require.Equal(t, 1, up.nextHeld(t), "the one free place is taken by a single call")

	_, body = post(t, endpoint, wire.Batch(20, 50, "a"))
	answers, err = wire.Answers(body)
	require.NoError(t, err, "%s", body)
	require.NotEmpty(t, answers)
	env, err := wire.ResultEnvelope(answers[0])
	require.NoError(t, err)
	assert.Equal(t, envelope.ServerBusy, env.Code)
	assert.Equal(t, "Server busy: this batch needs 50 calls at once, and at most 3 calls run at once here, so it can never be admitted", env.Message)
	assert.Equal(t, "Send at most 3 calls per batch, or send them one at a time.", env.Recovery)
	assert.False(t, env.HasRetryAfter(), "waiting cannot help")

	up.releaseAll()
	assert.Equal(t, "done", receive(t, single))
	<-held
	assert.EqualValues(t, 3, up.calls.peak.Load(), "never more calls in flight than places")
}

// Finding 3: with a header given twice, the gateway compared only the first
// value while a router or server may read the last.
func TestHeadersGivenTwiceAreRefused(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, `mcp {
	rate_limit per_key {
		key {header.X-Api-Key}
		rate 100/1h
	}
}
reverse_proxy `+strings.TrimPrefix(upstream, "http://"))
	endpoint := g.URL + "/mcp"
	call := wire.ToolCall("1", "echo")
	for _, h := range [][]string{
		{"Mcp-Method", "tools/call", "Mcp-Method", "ping"},
		{"Mcp-Name", "echo", "Mcp-Name", "admin_delete"},
		{"Mcp-Session-Id", "a", "Mcp-Session-Id", "b"},
		{"X-Api-Key", "fresh-1", "X-Api-Key", "real-key"},
	} {
		resp, body := post(t, endpoint, call, withHeader(h...))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", h, body)
		assert.True(t, resp.Close, "refused before the body is read: the connection is closed")
		env, err := wire.ErrorEnvelope(body)
		require.NoError(t, err)
		assert.Equal(t, "Request is ambiguous: the "+h[0]+" header is given 2 times", env.Message)
	}
	assert.Zero(t, rec.count(), "nothing reached the upstream")
	resp, _ := post(t, endpoint, call, withHeader("X-Api-Key", "k", "Mcp-Method", "tools/call"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "once each is fine")
}

// The same for the other parts of a request a key can read: Caddy's cookie
// placeholder takes the first cookie of a name in any letter case, and the
// query placeholder joins every value, while servers read another.
func TestCookiesAndQueryParametersAKeyReadsAreTakenOnce(t *testing.T) {
	up := startUpstream(t, pythonContentType)
	g := mcptest.StartGateway(t, `mcp {
	rate_limit per_session {
		key {http.request.cookie.session}:{http.request.uri.query.api_key}
		rate 100/1h
	}
}
reverse_proxy `+up.addr)
	call := wire.ToolCall("1", "echo")
	for name, c := range map[string]struct {
		query  string
		header []string
		what   string
	}{
		"cookie twice":             {"?api_key=k", []string{"Cookie", "Session=fresh; session=victim"}, "the cookie session is given 2 times"},
		"cookie in two headers":    {"?api_key=k", []string{"Cookie", "session=a", "Cookie", "session=b"}, "the cookie session is given 2 times"},
		"query parameter repeated": {"?api_key=real&api_key=fresh", []string{"Cookie", "session=s"}, "the query parameter api_key is given 2 times"},
	} {
		resp, body := post(t, g.URL+"/mcp"+c.query, call, withHeader(c.header...))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		env, err := wire.ErrorEnvelope(body)
		require.NoError(t, err, name)
		assert.Equal(t, "Request is ambiguous: "+c.what, env.Message, name)
	}
	assert.Zero(t, up.received.Load())
	resp, _ := post(t, g.URL+"/mcp?api_key=k&other=1&other=2", call, withHeader("Cookie", "session=s; theme=dark; theme=light"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "parts the key does not read may repeat")
}

// The SDK servers read an Authorization header's scheme in any letter case
// and its token across any run of whitespace: a limit keyed on the header
// reads it as they do, so "BEARER  secret" is the token of "Bearer secret".
func TestAuthorizationKeyIsReadAsServersReadIt(t *testing.T) {
	up := startUpstream(t, pythonContentType)
	g := mcptest.StartGateway(t, `mcp {
	rate_limit per_token {
		key {header.Authorization}
		rate 2/1h
	}
}
reverse_proxy `+up.addr)
	endpoint := g.URL + "/mcp"
	for range 2 {
		_, body := post(t, endpoint, wire.ToolCall("1", "echo"), withHeader("Authorization", "Bearer secret"))
		require.Equal(t, "done", wire.Outcome(body))
	}
	for _, v := range []string{"bearer secret", "BEARER secret", "Bearer  secret", "Bearer\tsecret", "bEaReR    secret"} {
		_, body := post(t, endpoint, wire.ToolCall("1", "echo"), withHeader("Authorization", v))
		assert.Equal(t, "RATE_LIMITED", wire.Outcome(body), "%q is the same token", v)
	}
	_, body := post(t, endpoint, wire.ToolCall("1", "echo"), withHeader("Authorization", "Bearer other"))
	assert.Equal(t, "done", wire.Outcome(body), "another token has its own bucket")
	assert.EqualValues(t, 3, up.received.Load())
}

// Finding 7: ids are echoed in every answer and compared with every
// response of a stream; one of 3,000,000 digits cost seconds of CPU.
func TestIDsBeyondTheirBoundAreRefused(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, "mcp\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	endpoint := g.URL + "/mcp"
	for name, id := range map[string]string{
		"long number": "1." + strings.Repeat("0", 300) + "1",
		"long string": `"` + strings.Repeat("x", 300) + `"`,
		"NaN":         "NaN",
		"Infinity":    "-Infinity",
	} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo"}}`
		resp, out := post(t, endpoint, body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		assert.Contains(t, string(out), `"id":null`, name)
		env, err := wire.ErrorEnvelope(out)
		assert.NoError(t, err, name)
		assert.Contains(t, env.Raw, "Request refused: an id is", name)
	}
	resp, _ := post(t, endpoint, `{"jsonrpc":"2.0","id":"`+strings.Repeat("x", 254)+`","method":"ping"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "256 bytes is the bound")
	assert.Equal(t, 1, rec.count())
}

// Finding 7: an id the upstream wrote back in another spelling (a JavaScript
// server parses ids as floats) was taken as unanswered, and the gateway
// appended a false HANDOFF_UPSTREAM_UNAVAILABLE after the real answer; and
// matching answers to a batch's requests was quadratic.
func TestStreamedAnswersInAnotherSpellingOrOrderAreMatched(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msgs []struct {
			ID json.Number `json:"id"`
		}
		if json.Unmarshal(body, &msgs) != nil {
			var one struct {
				ID json.Number `json:"id"`
			}
			_ = json.Unmarshal(body, &one)
			msgs = append(msgs, one)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := len(msgs) - 1; i >= 0; i-- {
			f, _ := msgs[i].ID.Float64()
			// As JSON.stringify writes a float64.
			id, _ := json.Marshal(f)
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", id)
		}
	}))
	t.Cleanup(srv.Close)
	g := mcptest.StartGateway(t, "mcp {\n\tmax_batch 8000\n}\nreverse_proxy "+strings.TrimPrefix(srv.URL, "http://"))
	endpoint := g.URL + "/mcp"

	for name, body := range map[string]string{
		"1.0 written back as 1":          `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"a"}}`,
		"1e2 written back as 100":        `{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"a"}}`,
		"17 digits written back rounded": `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"a"}}`,
		"8000 answers in reverse order":  wire.Batch(1, 8000, "a"),
	} {
		_, out := post(t, endpoint, body)
		events := strings.Count(string(out), "event: message\n")
		assert.NotContains(t, string(out), "HANDOFF_UPSTREAM_UNAVAILABLE", name)
		assert.Equal(t, strings.Count(body, `"method"`), events, "%s: one event per request, none from the gateway", name)
	}
}

// Finding 12: a batch of 50,000 refused calls got 24.5 MiB of envelopes
// back, 6.8 times the request.
func TestRefusedWideBatchGetsOneEnvelope(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, `mcp {
	max_batch 100000
	max_request_body 8MiB
	rate_limit l {
		rate 10/1h
	}
}
reverse_proxy `+strings.TrimPrefix(upstream, "http://"))
	batch := wire.Batch(1, 50_000, "a")
	resp, out := post(t, g.URL+"/mcp", batch)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Less(t, len(out), 4096, "one envelope, not 50,000")
	assert.Contains(t, string(out), `"id":null`)
	env, err := wire.ErrorEnvelope(out)
	assert.NoError(t, err)
	assert.Contains(t, env.Raw, "can never pass as one request")
	assert.Zero(t, rec.count())

	resp, out = post(t, g.URL+"/mcp", wire.Batch(1, 17, "a"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a batch within the bound gets an answer per request")
	var answers []json.RawMessage
	require.NoError(t, json.Unmarshal(out, &answers))
	assert.Len(t, answers, 17)
}

// Finding 5: the default max_batch refuses a wide batch with one envelope.
func TestBatchBeyondMaxBatchGetsOneEnvelope(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, "mcp\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	resp, out := post(t, g.URL+"/mcp", wire.Batch(1, 17, "a"))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	env, err := wire.ErrorEnvelope(out)
	require.NoError(t, err)
	assert.Equal(t, "Request is a batch of more than 16 messages, the most this server takes in one request", env.Message)
	assert.Equal(t, "Send at most 16 messages per batch, or send them one at a time.", env.Recovery)
	assert.Zero(t, rec.count())
	resp, _ = post(t, g.URL+"/mcp", wire.Batch(1, 16, "a"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// Finding 12: a request declaring a body over the limit, and sending none,
// got its 413 only after net/http had tried to read 256 KiB of it.
func TestOversizedDeclaredBodyIsAnsweredAtOnceAndTheConnectionClosed(t *testing.T) {
	// The client sends nothing after the headers: the answer must not wait.
	a := rawPost(t, "mcp", fmt.Sprintf("Content-Length: %d\r\n\r\n", 4<<20+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.resp.StatusCode)
	assert.True(t, a.resp.Close, "the connection is closed after the answer")
	assert.Contains(t, a.body, "Request body is larger than the 4194304 bytes")
	a.assertClosed(t)
	assert.Zero(t, a.upstream.count())
}

// rawAnswer is a gateway's answer to a request written by hand.
type rawAnswer struct {
	gateway  *mcptest.Gateway
	upstream *recorder
	conn     net.Conn
	resp     *http.Response
	body     string
}

// assertClosed checks that the gateway closed the connection after its
// answer.
func (a *rawAnswer) assertClosed(t *testing.T) {
	t.Helper()
	_, err := a.conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the server closed the connection")
}

// rawPost starts a gateway with mcpBlock before a reverse_proxy to a
// recorder, writes a POST /mcp of JSON to it on a connection of its own, with
// rest after the Content-Type header (the remaining headers, the blank line,
// any body), and reads the answer. The connection stays open for the test.
func rawPost(t *testing.T, mcpBlock, rest string) *rawAnswer {
	t.Helper()
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, mcpBlock+"\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	addr := strings.TrimPrefix(g.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s", addr, rest)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no answer")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &rawAnswer{gateway: g, upstream: rec, conn: conn, resp: resp, body: string(body)}
}

// Finding 4: a body arriving too slowly is cut after read_body_timeout and
// answered, and the connection closed.
func TestSlowBodyIsCutAfterReadBodyTimeout(t *testing.T) {
	a := rawPost(t, "mcp {\n\tread_body_timeout 300ms\n}", "Content-Length: 1000\r\n\r\n{\"jsonrpc\"")
	assert.Equal(t, http.StatusRequestTimeout, a.resp.StatusCode)
	assert.True(t, a.resp.Close)
	assert.Contains(t, a.body, "Request body did not arrive within 300ms")
	a.assertClosed(t)
	assert.Zero(t, a.upstream.count())

	// A body that arrives in time, in pieces, passes.
	resp2, _ := post(t, a.gateway.URL+"/mcp", wire.ToolCall("1", "echo"))
	assert.Equal(t, http.StatusOK, resp2.StatusCode)
}

// Finding 6: tool names of any size were kept as keys (100 names of 1 MiB
// held 100 MiB for an hour); MCP tool names have at most 128 characters.
func TestToolNameBeyondTheSpecIsRefusedWithItsID(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, `mcp {
	rate_limit per_tool {
		key {http.mcp.tool}
		rate 1/1h
	}
}
reverse_proxy `+strings.TrimPrefix(upstream, "http://"))
	resp, out := post(t, g.URL+"/mcp", wire.ToolCall("long", strings.Repeat("t", 1<<20)))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the id is fine, so the call gets a result")
	answer := decodeReply(t, out)
	assert.Equal(t, `"long"`, string(answer.ID))
	env, err := envelope.ParseResult(answer.Result)
	require.NoError(t, err)
	assert.Equal(t, envelope.ValidationError, env.Code)
	assert.Equal(t, "Request refused: a tool name is 1048576 characters long; MCP tool names have at most 128", env.Message)
	assert.Less(t, len(out), 2048)
	assert.Zero(t, rec.count())
	resp, _ = post(t, g.URL+"/mcp", wire.ToolCall("ok", strings.Repeat("é", 128)))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1, rec.count(), "128 characters is the bound, whatever their bytes")
}
