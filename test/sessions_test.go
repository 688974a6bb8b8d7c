package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/session"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Stateful MCP servers keep a session in one process. Behind a pool of
// replicas, every request of a session must reach the replica that issued
// it; the id is minted after the balancer chose, so no hash of it can do
// that. These tests run three replicas of the Go SDK's everything-server
// behind one gateway, with the official clients.

const poolSecret = "test-session-secret-0123456789abcdef"

// poolSite is a site proxying to replicas (host:port) with policy as the
// lb_policy block, after mcp with the given block body.
func poolSite(mcpBody string, replicas []string, policy string) string {
	return fmt.Sprintf("mcp {\n%s\n}\nreverse_proxy %s {\n\t%s\n\theader_up Host {upstream_hostport}\n}",
		mcpBody, strings.Join(replicas, " "), policy)
}

const (
	sessionsOn     = "sessions {\n\tsecret " + poolSecret + "\n}"
	mcpSessionLB   = "lb_policy mcp_session {\n\t\tfallback round_robin\n\t}"
	roundRobinLB   = "lb_policy round_robin"
	sessionsPerRun = 10
	callsPerRun    = 10
)

func startReplicas(t *testing.T, n int) []string {
	t.Helper()
	bin := mcptest.BuildEverythingServer(t)
	hostports := make([]string, n)
	for i := range hostports {
		u, err := url.Parse(mcptest.StartEverythingServer(t, bin))
		require.NoError(t, err)
		hostports[i] = u.Host
	}
	return hostports
}

// goRun is what one Go SDK client session saw.
type goRun struct {
	connectErr       error
	ok, failed       int
	errs             []string
	progress         int
	toolsChangedSeen bool
}

// runGoSession opens a 2025-11-25 session (the stateless revision has
// none) and makes callsPerRun calls: simple ones, one that streams progress
// notifications before its result, and one that makes the server notify
// every session on its standalone GET stream.
func runGoSession(ctx context.Context, endpoint string) goRun {
	var run goRun
	var progress atomic.Int32
	changed := make(chan struct{}, 1)
	c := mcp.NewClient(&mcp.Implementation{Name: "pool-client", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		run.connectErr = err
		return run
	}
	defer cs.Close()
	call := func(params *mcp.CallToolParams) {
		res, err := cs.CallTool(ctx, params)
		switch {
		case err != nil:
			run.failed++
			run.errs = append(run.errs, err.Error())
		case res.IsError:
			run.failed++
			run.errs = append(run.errs, fmt.Sprintf("%s: isError %v", params.Name, res.Content))
		default:
			run.ok++
		}
	}
	for range callsPerRun - 2 {
		call(&mcp.CallToolParams{Name: "test_simple_text"})
	}
	streamed := &mcp.CallToolParams{Name: "test_tool_with_progress"}
	streamed.SetProgressToken("p1")
	call(streamed)
	call(&mcp.CallToolParams{Name: "test_trigger_tool_change"})
	if run.failed > 0 {
		return run
	}
	select {
	case <-changed:
		run.toolsChangedSeen = true
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	run.progress = int(progress.Load())
	return run
}

// runGoSessions runs sessionsPerRun sessions at once.
func runGoSessions(t *testing.T, endpoint string) []goRun {
	t.Helper()
	runs := make([]goRun, sessionsPerRun)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() { runs[i] = runGoSession(t.Context(), endpoint) })
	}
	wg.Wait()
	return runs
}

func TestSessionsStayOnTheirReplica(t *testing.T) {
	replicas := startReplicas(t, 3)

	t.Run("round_robin without sessions breaks them", func(t *testing.T) {
		g := mcptest.StartGateway(t, poolSite("", replicas, roundRobinLB))
		failures := 0
		for _, run := range runGoSessions(t, g.URL+"/mcp") {
			if run.connectErr != nil || run.failed > 0 {
				failures++
			}
		}
		assert.Equal(t, sessionsPerRun, failures, "sessions that failed: the control for what follows")
	})

	t.Run("go client", func(t *testing.T) {
		g := mcptest.StartGateway(t, poolSite(sessionsOn, replicas, mcpSessionLB))
		for i, run := range runGoSessions(t, g.URL+"/mcp") {
			require.NoError(t, run.connectErr, "session %d", i)
			assert.Equal(t, callsPerRun, run.ok, "session %d: calls ok (errors %q)", i, run.errs)
			assert.Equal(t, 3, run.progress, "session %d: progress notifications streamed before the result", i)
			assert.True(t, run.toolsChangedSeen, "session %d: a notification on the standalone GET stream", i)
		}
	})

	t.Run("typescript client", func(t *testing.T) {
		g := mcptest.StartGateway(t, poolSite(sessionsOn, replicas, mcpSessionLB))
		steps := make([]mcptest.TSStep, 0, callsPerRun)
		for range callsPerRun - 1 {
			steps = append(steps, mcptest.CallToolStep("test_simple_text", map[string]any{}))
		}
		streamed := mcptest.CallToolStep("test_tool_with_progress", map[string]any{})
		streamed.Progress = true
		steps = append(steps, streamed)
		outs := make([]mcptest.TSOutput, sessionsPerRun)
		var wg sync.WaitGroup
		for i := range outs {
			wg.Go(func() { outs[i] = mcptest.RunTSClient(t, mcptest.TSScript{URL: g.URL + "/mcp", Steps: steps}) })
		}
		wg.Wait()
		ids := make(map[string]bool)
		for i, out := range outs {
			require.Nil(t, out.ConnectError, "session %d", i)
			assert.Empty(t, out.TransportErrors, "session %d: errors on its streams, the standalone GET one included", i)
			require.Len(t, out.Results, callsPerRun, "session %d", i)
			for j, r := range out.Results {
				assert.Nil(t, r.Error, "session %d call %d", i, j)
				assert.False(t, r.CallToolResult(t).IsError, "session %d call %d", i, j)
			}
			assert.Len(t, out.Results[callsPerRun-1].Progress, 3, "session %d: progress streamed before the result", i)
			ids[out.Session.SessionID] = true
		}
		assert.Len(t, ids, sessionsPerRun, "one session id each")
	})
}

// replica is a stateful Go SDK server whose whoami tool answers with its
// name and the session id it issued.
type replica struct {
	name     string
	hostport string
	srv      *httptest.Server
}

func startReplica(t *testing.T, name string) *replica {
	t.Helper()
	return serveReplica(t, name, mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil), nil)
}

// serveReplica adds whoami to server and serves it on a loopback port.
func serveReplica(t *testing.T, name string, server *mcp.Server, opts *mcp.StreamableHTTPOptions) *replica {
	t.Helper()
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + req.Session.ID()}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return &replica{name: name, hostport: strings.TrimPrefix(srv.URL, "http://"), srv: srv}
}

// headerTransport adds headers to every request and keeps the last
// Mcp-Session-Id a response carried: what the client was given. It sends
// through base, http.DefaultTransport if nil.
type headerTransport struct {
	add     http.Header
	base    http.RoundTripper
	mu      sync.Mutex
	session string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.add {
		r.Header[k] = v
	}
	base := h.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
		h.mu.Lock()
		h.session = resp.Header.Get("Mcp-Session-Id")
		h.mu.Unlock()
	}
	return resp, err
}

// openSession opens a session through the gateway with the Go SDK client
// (Authorization auth, when not empty), and returns it, the token the
// client was given, and what whoami answered: the replica and the
// replica's own session id.
func openSession(t *testing.T, endpoint, auth string) (cs *mcp.ClientSession, token, replicaName, upstreamID string) {
	t.Helper()
	// The session outlives reloads in some tests: a call a reload closed
	// unanswered is sent again.
	tr := &headerTransport{add: http.Header{}, base: &mcptest.ResendingTransport{}}
	if auth != "" {
		tr.add.Set("Authorization", auth)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "sessions-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
	require.NoError(t, err)
	replicaName, upstreamID, _ = strings.Cut(mcptest.TextOf(t, res), " ")
	tr.mu.Lock()
	token = tr.session
	tr.mu.Unlock()
	require.NotEmpty(t, token)
	require.NotEqual(t, upstreamID, token, "the client never sees the replica's own id")
	return cs, token, replicaName, upstreamID
}

// rawCall sends whoami as call id 7 of the session token names, and
// returns the status and body.
func rawCall(t *testing.T, method, endpoint, token, auth string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, endpoint, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", token)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	// Sent again if a reload closed it unanswered.
	resp, err := mcptest.ResendingClient().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The answer is the first event with data.
		var event strings.Builder
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			event.WriteString(sc.Text() + "\n")
			if sc.Text() == "" && strings.Contains(event.String(), "data:") {
				break
			}
		}
		return resp.StatusCode, event.String()
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// notFound asserts the answer MCP clients read as "session gone": 404,
// and a JSON-RPC error for the request's id.
func notFound(t *testing.T, status int, body, id string) {
	t.Helper()
	assert.Equal(t, http.StatusNotFound, status, body)
	assert.Contains(t, body, `"id":`+id+`,"error":{"code":-32001,"message":"Session not found`)
}

func TestSessionTokensThatDoNotOpenGet404(t *testing.T) {
	a, b := startReplica(t, "a"), startReplica(t, "b")
	replicas := []string{a.hostport, b.hostport}
	bound := "sessions {\n\tsecret " + poolSecret + "\n\tbind {http.request.header.Authorization}\n}"
	g := mcptest.StartGateway(t, poolSite(bound, replicas, mcpSessionLB))
	endpoint := g.URL + "/mcp"
	_, token, name, upstreamID := openSession(t, endpoint, "Bearer alice")

	status, body := rawCall(t, http.MethodPost, endpoint, token, "Bearer alice")
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, name+" "+upstreamID, "the replica that issued the session, with its own id restored")

	t.Run("tampered", func(t *testing.T) {
		tampered := []byte(token)
		tampered[len(tampered)/2] ^= 1
		status, body := rawCall(t, http.MethodPost, endpoint, string(tampered), "Bearer alice")
		notFound(t, status, body, "7")
		status, body = rawCall(t, http.MethodPost, endpoint, upstreamID, "Bearer alice")
		notFound(t, status, body, "7")
		status, body = rawCall(t, http.MethodGet, endpoint, string(tampered), "Bearer alice")
		notFound(t, status, body, "null")
	})
	t.Run("other credentials", func(t *testing.T) {
		status, body := rawCall(t, http.MethodPost, endpoint, token, "Bearer bob")
		notFound(t, status, body, "7")
		status, body = rawCall(t, http.MethodPost, endpoint, token, "")
		notFound(t, status, body, "7")
	})
	t.Run("expired", func(t *testing.T) {
		keys, err := session.FromSecrets([]string{poolSecret})
		require.NoError(t, err)
		alice := session.PrincipalOf("bearer alice") // Authorization as servers read it
		seal := func(issued time.Time) string {
			tok, err := keys.Seal(session.Session{Upstream: map[string]string{"a": a.hostport, "b": b.hostport}[name], ID: upstreamID, Issued: issued}, &alice)
			require.NoError(t, err)
			return tok
		}
		status, body := rawCall(t, http.MethodPost, endpoint, seal(time.Now().Add(-23*time.Hour)), "Bearer alice")
		assert.Equal(t, http.StatusOK, status, "within the default ttl of 24h: %s", body)
		status, body = rawCall(t, http.MethodPost, endpoint, seal(time.Now().Add(-25*time.Hour)), "Bearer alice")
		notFound(t, status, body, "7")
	})
}

// Rotation as docs/operating.md writes it: the secrets from two variables, the
// old one unset until a rotation, then the new secret first and the old
// one kept, then the old one gone.
func TestSessionKeysRotateWithoutBreakingSessions(t *testing.T) {
	a := startReplica(t, "a")
	const newSecret = "the-next-session-secret-0123456789"
	site := func(secrets string) string {
		return poolSite("sessions {\n\tsecret "+secrets+"\n}", []string{a.hostport}, mcpSessionLB)
	}
	fromEnv := site("{env.CADDY_MCP_TEST_SECRET} {env.CADDY_MCP_TEST_SECRET_OLD}")
	t.Setenv("CADDY_MCP_TEST_SECRET", poolSecret)
	t.Setenv("CADDY_MCP_TEST_SECRET_OLD", "")
	g := mcptest.StartGateway(t, fromEnv)
	endpoint := g.URL + "/mcp"
	cs, token, _, _ := openSession(t, endpoint, "")

	t.Setenv("CADDY_MCP_TEST_SECRET", newSecret)
	t.Setenv("CADDY_MCP_TEST_SECRET_OLD", poolSecret)
	g.Reload(t, fromEnv)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
	require.NoError(t, err, "the old secret still opens")
	assert.False(t, res.IsError)
	_, fresh, _, _ := openSession(t, endpoint, "")
	keys, err := session.FromSecrets([]string{newSecret})
	require.NoError(t, err)
	_, err = keys.Open(fresh, time.Now(), time.Hour, nil)
	assert.NoError(t, err, "the new secret seals")

	g.Reload(t, site(newSecret))
	status, body := rawCall(t, http.MethodPost, endpoint, token, "")
	notFound(t, status, body, "7")
	status, body = rawCall(t, http.MethodPost, endpoint, fresh, "")
	assert.Equal(t, http.StatusOK, status, body)
}

func TestPinnedReplicaDownOrRemoved(t *testing.T) {
	a, b := startReplica(t, "a"), startReplica(t, "b")
	byName := map[string]*replica{"a": a, "b": b}
	// Passive health checks: a replica that refused a connection is
	// unavailable for 30 s.
	lb := mcpSessionLB + "\n\tfail_duration 30s"
	g := mcptest.StartGateway(t, poolSite(sessionsOn, []string{a.hostport, b.hostport}, lb))
	endpoint := g.URL + "/mcp"
	cs1, _, name1, _ := openSession(t, endpoint, "")
	cs2, token2, name2, _ := openSession(t, endpoint, "")
	require.NotEqual(t, name1, name2, "round_robin put the two sessions on both replicas")

	t.Run("down: retry later", func(t *testing.T) {
		down := byName[name1]
		down.srv.CloseClientConnections()
		down.srv.Close()
		// The first call finds the connection refused; the second, the
		// replica marked unavailable: both are told to retry later.
		for _, why := range []string{"the connection was refused", "the server that holds this session is not available now"} {
			res, err := cs1.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
			require.NoError(t, err)
			require.True(t, res.IsError)
			text := mcptest.TextOf(t, res)
			assert.Contains(t, text, `code="HANDOFF_UPSTREAM_UNAVAILABLE"`)
			assert.Contains(t, text, why)
			assert.Contains(t, text, "<retry_after>")
		}
		res, err := cs2.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
		require.NoError(t, err)
		assert.Equal(t, name2, strings.Fields(mcptest.TextOf(t, res))[0], "the other replica's sessions go on")
	})
	t.Run("removed: session gone", func(t *testing.T) {
		kept := byName[name1].hostport // the one that is down
		g.Reload(t, poolSite(sessionsOn, []string{kept}, lb))
		status, body := rawCall(t, http.MethodPost, endpoint, token2, "")
		notFound(t, status, body, "7")
	})
}

// With sessions on, {http.mcp.session_id} is the id the gateway verified: a
// client that invents ids gets 404 and no fresh bucket, and one session's
// calls share one bucket.
func TestRateLimitsKeyedBySessionCannotBeWalkedAround(t *testing.T) {
	a := startReplica(t, "a")
	limit := sessionsOn + "\nrate_limit per_session {\n\tkey {http.mcp.session_id}\n\trate 2/1h\n}"
	g := mcptest.StartGateway(t, poolSite(limit, []string{a.hostport}, mcpSessionLB))
	endpoint := g.URL + "/mcp"
	cs, token, _, _ := openSession(t, endpoint, "") // the first call
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
	require.NoError(t, err)
	require.False(t, res.IsError, "the second call")
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
	require.NoError(t, err)
	assert.Contains(t, mcptest.TextOf(t, res), `code="RATE_LIMITED"`)

	for _, invented := range []string{"x", token + "x", strings.ToUpper(token)} {
		status, body := rawCall(t, http.MethodPost, endpoint, invented, "")
		notFound(t, status, body, "7")
	}
}

// Without a secret, the keys are generated in Caddy's storage; /mcp/status
// says so, and the metrics count what tokens did.
func TestSessionsShowInStatusAndMetrics(t *testing.T) {
	a := startReplica(t, "a")
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true,
		Site: poolSite("sessions {\n\tttl 2h\n}", []string{a.hostport}, mcpSessionLB)})
	_, s, err := getStatus(g.AdminURL)
	require.NoError(t, err)
	require.Len(t, s.Handlers, 1)
	require.NotNil(t, s.Handlers[0].Features.Sessions)
	got := *s.Handlers[0].Features.Sessions
	assert.Len(t, got.SealingKey, 8)
	got.SealingKey = ""
	assert.Equal(t, session.Status{Keys: "storage", KeysHeld: 1, TTL: "2h"}, got)
	_, err = os.Stat(filepath.Join(g.Storage, "mcp", "session_keys.json"))
	assert.NoError(t, err, "the keys are in the gateway's storage")

	before := mcpMetrics(t, g.AdminURL)
	endpoint := g.URL + "/mcp"
	_, token, _, _ := openSession(t, endpoint, "") // issued, then opened by whoami
	status, body := rawCall(t, http.MethodPost, endpoint, "x"+token, "")
	notFound(t, status, body, "7")
	d := delta(before, mcpMetrics(t, g.AdminURL))
	assert.Equal(t, 1.0, d[`caddy_mcp_session_tokens_total{outcome="issued"}`], "%v", d)
	assert.Equal(t, 1.0, d[`caddy_mcp_session_tokens_total{outcome="invalid"}`], "%v", d)
	assert.GreaterOrEqual(t, d[`caddy_mcp_session_tokens_total{outcome="opened"}`], 2.0, "the initialized notification and whoami at least: %v", d)
}

// Only tokens the gateway sealed reach a session, whatever the request's
// era, method or encoding: an upstream's own id, given any way, gets 404.
// (A header spelled Mcp_Session_Id never reaches the handler: Caddy's
// server drops header names with underscores.)
func TestOnlySealedTokensReachASession(t *testing.T) {
	a := startReplica(t, "a")
	g := mcptest.StartGateway(t, poolSite(sessionsOn, []string{a.hostport}, mcpSessionLB))
	endpoint := g.URL + "/mcp"
	_, token, _, upstreamID := openSession(t, endpoint, "")

	send := func(method string, hdr http.Header) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	for name, hdr := range map[string]http.Header{
		"the upstream's id, claiming 2026-07-28": {"Mcp-Session-Id": {upstreamID}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"whoami"}},
		"a token and the upstream's id":          {"Mcp-Session-Id": {token, upstreamID}, "Mcp-Protocol-Version": {"2025-11-25"}},
		"an empty value and the upstream's id":   {"Mcp-Session-Id": {"", upstreamID}, "Mcp-Protocol-Version": {"2025-11-25"}},
	} {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			status, body := send(method, hdr)
			assert.Equal(t, http.StatusNotFound, status, "%s, %s: %s", name, method, body)
		}
	}
	status, body := send(http.MethodPost, http.Header{"Mcp-Session-Id": {upstreamID}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"whoami"}})
	notFound(t, status, body, "7")

	t.Run("a body the gateway does not read still gets a sealed id", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Encoding", "x-anything")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			keys, err := session.FromSecrets([]string{poolSecret})
			require.NoError(t, err)
			_, err = keys.Open(id, time.Now(), time.Hour, nil)
			assert.NoError(t, err, "the client got %q, not a token", id)
		}
	})
}

// With bind, a request without a principal opens no session and uses none.
func TestBoundSessionsNeedAPrincipal(t *testing.T) {
	a := startReplica(t, "a")
	bound := "sessions {\n\tsecret " + poolSecret + "\n\tbind {http.request.header.Authorization}\n}"
	g := mcptest.StartGateway(t, poolSite(bound, []string{a.hostport}, mcpSessionLB))
	endpoint := g.URL + "/mcp"

	c := mcp.NewClient(&mcp.Implementation{Name: "anonymous", Version: "1"}, nil)
	_, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "opens sessions only for authenticated clients")

	keys, err := session.FromSecrets([]string{poolSecret})
	require.NoError(t, err)
	nobody := session.PrincipalOf("")
	tok, err := keys.Seal(session.Session{Upstream: a.hostport, ID: "x", Issued: time.Now()}, &nobody)
	require.NoError(t, err)
	status, body := rawCall(t, http.MethodPost, endpoint, tok, "")
	notFound(t, status, body, "7")
}

// With bind on Authorization, the principal is the header as the SDK
// servers read it, as rate-limit keys read it: the scheme in any letter
// case, the token across any run of whitespace. A client whose library
// spells the scheme otherwise keeps its session; another token still gets
// 404. Found by an attacker's review: bind read the raw header.
func TestBoundSessionsReadAuthorizationAsServersDo(t *testing.T) {
	a := startReplica(t, "a")
	bound := "sessions {\n\tsecret " + poolSecret + "\n\tbind {http.request.header.Authorization}\n}"
	g := mcptest.StartGateway(t, poolSite(bound, []string{a.hostport}, mcpSessionLB))
	endpoint := g.URL + "/mcp"
	_, token, name, upstreamID := openSession(t, endpoint, "Bearer alice-token")

	for _, auth := range []string{"Bearer alice-token", "bearer   alice-token", "BEARER\talice-token"} {
		status, body := rawCall(t, http.MethodPost, endpoint, token, auth)
		assert.Equal(t, http.StatusOK, status, "%q: %s", auth, body)
		assert.Contains(t, body, name+" "+upstreamID, "%q: the session, on its replica", auth)
	}
	for _, auth := range []string{"Bearer bob-token", "Bearer alice-token2", "Basic alice-token"} {
		status, body := rawCall(t, http.MethodPost, endpoint, token, auth)
		notFound(t, status, body, "7")
	}
}

// An upstream's own id never leaves in a 1xx response or a trailer.
func TestUpstreamIDsDoNotLeakInInterimResponsesOrTrailers(t *testing.T) {
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Mcp-Session-Id", "raw-in-103")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Mcp-Session-Id", "raw-final")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		w.Header().Set(http.TrailerPrefix+"Mcp-Session-Id", "raw-in-trailer")
	}))
	t.Cleanup(hostile.Close)
	g := mcptest.StartGateway(t, poolSite(sessionsOn, []string{strings.TrimPrefix(hostile.URL, "http://")}, mcpSessionLB))

	var interim []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		interim = append(interim, h.Values("Mcp-Session-Id")...)
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, g.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Empty(t, interim, "1xx")
	assert.NotContains(t, resp.Header.Values("Mcp-Session-Id"), "raw-final")
	assert.Len(t, resp.Header.Values("Mcp-Session-Id"), 1)
	for k, v := range resp.Trailer {
		assert.NotContains(t, v, "raw-in-trailer", "trailer %s", k)
	}
}

// A stream that breaks after an event id is resumed with GET and
// Last-Event-ID: the gateway opens the token, and the replica holding the
// session replays what the client missed. (Any other replica would answer
// 404: it has no such session.)
func TestLastEventIDReconnectsReachTheirReplica(t *testing.T) {
	release := make(chan struct{})
	a, b := startResumableReplica(t, "a", release), startResumableReplica(t, "b", release)
	g := mcptest.StartGateway(t, poolSite(sessionsOn, []string{a.hostport, b.hostport}, mcpSessionLB))
	endpoint := g.URL + "/mcp"
	_, token, name, upstreamID := openSession(t, endpoint, "")

	// The call streams a progress event, then waits: the client leaves
	// after that event, remembering its id.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint,
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait","arguments":{},"_meta":{"progressToken":"p"}}}`))
	require.NoError(t, err)
	sessionHeaders(req, token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lastID := ""
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			lastID = id
		}
		if strings.Contains(sc.Text(), "notifications/progress") {
			break
		}
	}
	require.NoError(t, resp.Body.Close())
	require.NotEmpty(t, lastID, "an event id to resume from")
	close(release)

	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, endpoint, nil)
	require.NoError(t, err)
	sessionHeaders(req, token)
	req.Header.Set("Last-Event-ID", lastID)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the replica holding the session resumes it")
	var replayed strings.Builder
	for sc := bufio.NewScanner(resp.Body); sc.Scan() && !strings.Contains(replayed.String(), `"id":7`); {
		replayed.WriteString(sc.Text() + "\n")
	}
	assert.Contains(t, replayed.String(), `"id":7,"result"`)
	assert.Contains(t, replayed.String(), name+" "+upstreamID, "answered by the session's replica")
}

// startResumableReplica is a stateful Go SDK server keeping its streams'
// events, so that a client may resume one, with a tool that sends one
// progress notification and answers once release is closed.
func startResumableReplica(t *testing.T, name string, release <-chan struct{}) *replica {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "wait", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1})
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + req.Session.ID()}}}, nil, nil
		})
	return serveReplica(t, name, server, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
}

// sessionHeaders are the headers of a 2025-11-25 request in the session
// token names.
func sessionHeaders(req *http.Request, token string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", token)
}

// MCP 2026-07-28 has no sessions: through a gateway with sessions on, its
// calls are balanced by the fallback policy and answered as directly, and
// no token is issued.
func TestStatelessClientsPassAPoolWithSessions(t *testing.T) {
	stateless := &mcp.StreamableHTTPOptions{Stateless: true}
	a := serveReplica(t, "a", mcp.NewServer(&mcp.Implementation{Name: "a", Version: "1"}, nil), stateless)
	b := serveReplica(t, "b", mcp.NewServer(&mcp.Implementation{Name: "b", Version: "1"}, nil), stateless)
	g := mcptest.StartGateway(t, poolSite(sessionsOn, []string{a.hostport, b.hostport}, mcpSessionLB))
	tr := &headerTransport{add: http.Header{}}
	c := mcp.NewClient(&mcp.Implementation{Name: "stateless-client", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	require.Equal(t, "2026-07-28", cs.InitializeResult().ProtocolVersion)
	answered := map[string]int{}
	for range 4 {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		answered[strings.Fields(mcptest.TextOf(t, res))[0]]++
	}
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, answered, "balanced round robin, as the fallback says")
	tr.mu.Lock()
	defer tr.mu.Unlock()
	assert.Empty(t, tr.session, "no session, no token")
}
