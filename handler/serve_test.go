package handler

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// newCaddyContext is a context like the one Caddy provisions modules with,
// without a running server, as Caddy's own handler tests make it.
func newCaddyContext() (caddy.Context, context.CancelFunc) {
	return caddy.NewContext(caddy.Context{Context: context.Background()})
}

// contexts are the cancel functions of the contexts provision gave each
// handler, whose cancellation cleans up the features Caddy loaded in it.
var contexts sync.Map

// unload cleans up h as Caddy does when its config is replaced: h, then
// the modules loaded in its context (its features).
func unload(t *testing.T, h *Handler) {
	t.Helper()
	require.NoError(t, h.Cleanup())
	if cancel, ok := contexts.LoadAndDelete(h); ok {
		cancel.(context.CancelFunc)()
	}
}

// provision provisions h as Caddy would, logging nowhere unless h has a
// logger, and cleans it up when the test ends. Tests whose buckets or
// queues must see time pass run in a synctest bubble, where time.Sleep moves
// the clock the handler reads.
func provision(t *testing.T, h *Handler) *Handler {
	t.Helper()
	ctx, cancel := newCaddyContext()
	t.Cleanup(cancel)
	contexts.Store(h, cancel)
	if h.logger == nil {
		h.logger = zap.NewNop()
	}
	require.NoError(t, h.Provision(ctx))
	require.NoError(t, h.Validate())
	t.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// limited returns a handler with one limit, named perClient.
func limited(t *testing.T, rl RateLimit) *Handler {
	t.Helper()
	return provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{perClient: &rl})})
}

const (
	perClient = "per_client"
	clientIP  = "203.0.113.7"
	// upstreamAnswer is what the fake upstream answers to anything.
	upstreamAnswer = `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
)

// newRequest builds a request as Caddy's server hands it to a handler: with
// a replacer and the vars that hold the client's address.
func newRequest(method, body string, opts ...func(*http.Request)) *http.Request {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, "http://gateway.example/mcp", nil)
	} else {
		r = httptest.NewRequest(method, "http://gateway.example/mcp", strings.NewReader(body))
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	vars := map[string]any{caddyhttp.ClientIPVarKey: clientIP}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	for _, o := range opts {
		o(r)
	}
	caddyhttp.NewTestReplacer(r)
	return r
}

func post(body string, opts ...func(*http.Request)) *http.Request {
	return newRequest(http.MethodPost, body, opts...)
}

func fromClient(ip string) func(*http.Request) {
	return func(r *http.Request) {
		r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)[caddyhttp.ClientIPVarKey] = ip
	}
}

func header(name, value string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set(name, value) }
}

// chunked makes the request's length unknown, as with Transfer-Encoding:
// chunked.
func chunked(r *http.Request) {
	r.ContentLength = -1
	r.TransferEncoding = []string{"chunked"}
	r.Body = io.NopCloser(r.Body)
}

// upstream is the next handler: it records what reached it and answers
// upstreamAnswer.
type upstream struct {
	calls         int
	body          []byte
	contentLength int64
	request       *http.Request
	// ask are placeholders to resolve with the request's replacer, and
	// resolved what they gave.
	ask      []string
	resolved map[string]string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	u.calls++
	u.request = r
	u.contentLength = r.ContentLength
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	u.body = body
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	u.resolved = map[string]string{}
	for _, p := range u.ask {
		v, known := repl.GetString(strings.Trim(p, "{}"))
		if !known {
			v = "<unknown>"
		}
		u.resolved[p] = v
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = io.WriteString(w, upstreamAnswer)
	return err
}

func serve(t *testing.T, h *Handler, r *http.Request, next caddyhttp.Handler) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, r, next))
	return w
}

func toolsCall(id, tool string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"q":"x"}}}`
}

// requireForwarded checks that the request reached the upstream, whose
// answer the client got.
func requireForwarded(t *testing.T, u *upstream, calls int, w *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, calls, u.calls, "the request should reach the upstream; got %d %s", w.Code, w.Body)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, upstreamAnswer, w.Body.String())
}

func TestRateLimitedCallGetsEnvelopeWithRetryAfter(t *testing.T) {
	ids := []string{`"call-1"`, `"a\"b\\c\u00e9/"`, `""`, `7`, `0`, `-3`, `12345678901234567890123`, `1.5e3`, `null`}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := limited(t, RateLimit{Rate: "1/10s", Burst: 1})
				u := &upstream{}
				requireForwarded(t, u, 1, serve(t, h, post(toolsCall(id, "search")), u))

				time.Sleep(time.Second)
				w := serve(t, h, post(toolsCall(id, "search")), u)

				assert.Equal(t, 1, u.calls, "a refused call never reaches the upstream")
				assert.Equal(t, http.StatusOK, w.Code, "a tools/call is answered with a result, which every client reads")
				assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
				assert.Equal(t, "9", w.Header().Get("Retry-After"))
				assert.Contains(t, w.Body.String(), `<tool_error code=\"RATE_LIMITED\"`, "JSON is written without HTML escaping")

				m := members(t, w.Body.Bytes())
				assert.Equal(t, id, string(m["id"]), "the id is echoed byte for byte")
				assert.NotContains(t, m, "error")
				env, isError := toolError(t, m["result"])
				assert.True(t, isError)
				assert.Equal(t, envelope.RateLimited, env.Code)
				assert.Equal(t, envelope.SeverityError, env.Severity)
				assert.Equal(t, "Rate limit exceeded: 1 call per 10s for this client", env.Message)
				assert.Equal(t, "Wait 9 seconds, then retry the same call. Calls made sooner are refused too.", env.Recovery)
				assert.Equal(t, 9.0, env.RetryAfter)
				assert.Equal(t, []envelope.Detail{
					{Key: "limit", Value: perClient},
					{Key: "rate", Value: "1 call per 10s"},
					{Key: "burst", Value: "1"},
				}, env.Details)
			})
		})
	}
}

func TestRetryAfterIsWholeSecondsRoundedUp(t *testing.T) {
	tests := []struct {
		after time.Duration
		want  string
	}{
		{0, "10"},
		{time.Second, "9"},
		{4200 * time.Millisecond, "6"},
		{9 * time.Second, "1"},
		{9500 * time.Millisecond, "1"},
		{9999 * time.Millisecond, "1"},
		{10*time.Second - time.Nanosecond, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.after.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := limited(t, RateLimit{Rate: "1/10s"})
				u := &upstream{}
				requireForwarded(t, u, 1, serve(t, h, post(toolsCall(`1`, "search")), u))

				time.Sleep(tt.after)
				w := serve(t, h, post(toolsCall(`2`, "search")), u)
				require.Equal(t, 1, u.calls)
				assert.Equal(t, tt.want, w.Header().Get("Retry-After"))
				env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
				assert.Contains(t, env.Raw, "<retry_after>"+tt.want+" seconds</retry_after>")
				secs := "seconds"
				if tt.want == "1" {
					secs = "second"
				}
				assert.Equal(t, "Wait "+tt.want+" "+secs+", then retry the same call. Calls made sooner are refused too.", env.Recovery)
			})
		})
	}
}

func TestBucketRefillsAsTheClockAdvances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := limited(t, RateLimit{Rate: "2/10s"})
		u := &upstream{}
		call := func() *httptest.ResponseRecorder { return serve(t, h, post(toolsCall(`1`, "search")), u) }

		requireForwarded(t, u, 1, call())
		requireForwarded(t, u, 2, call())
		assert.Equal(t, "5", call().Header().Get("Retry-After"), "burst defaults to the rate's events")

		time.Sleep(4 * time.Second)
		assert.Equal(t, "1", call().Header().Get("Retry-After"))

		time.Sleep(time.Second)
		requireForwarded(t, u, 3, call())
		assert.Equal(t, "5", call().Header().Get("Retry-After"))

		time.Sleep(time.Hour)
		requireForwarded(t, u, 4, call())
		requireForwarded(t, u, 5, call())
		assert.Equal(t, "5", call().Header().Get("Retry-After"), "a quiet hour refills the burst, not more")
	})
}

func TestRateLimitedRequestOtherThanCallGetsRPCError(t *testing.T) {
	for _, id := range []string{`"list-1"`, `42`} {
		t.Run(id, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "1/10s", Methods: []string{"tools/list"}})
			u := &upstream{}
			list := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`
			requireForwarded(t, u, 1, serve(t, h, post(list), u))

			w := serve(t, h, post(list), u)
			assert.Equal(t, 1, u.calls)
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.Equal(t, "10", w.Header().Get("Retry-After"))

			m := members(t, w.Body.Bytes())
			assert.Equal(t, id, string(m["id"]))
			assert.NotContains(t, m, "result")
			e := decodeRPCError(t, m["error"])
			assert.Equal(t, envelope.CodeServerError, e.Code)
			assert.Equal(t, "Rate limit exceeded: 1 request per 10s for this client", e.Message)
			assert.Equal(t, "RATE_LIMITED", e.Data.Code)
			assert.Equal(t, "error", e.Data.Severity)
			assert.NotEmpty(t, e.Data.Recovery)
			require.NotNil(t, e.Data.RetryAfter)
			assert.Equal(t, 10.0, *e.Data.RetryAfter)
			env, err := envelope.Parse(e.Data.Envelope)
			require.NoError(t, err)
			assert.Equal(t, envelope.RateLimited, env.Code)
			assert.Equal(t, e.Message, env.Message)
		})
	}
}

func TestRateLimitedNotificationGets429WithoutID(t *testing.T) {
	h := limited(t, RateLimit{Rate: "1/10s", Methods: []string{"notifications/progress"}})
	u := &upstream{}
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":5}}`
	requireForwarded(t, u, 1, serve(t, h, post(progress), u))

	w := serve(t, h, post(progress), u)
	assert.Equal(t, 1, u.calls)
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, "10", w.Header().Get("Retry-After"))
	m := members(t, w.Body.Bytes())
	assert.NotContains(t, m, "id", "nothing to echo: a notification has no id")
	e := decodeRPCError(t, m["error"])
	assert.Equal(t, envelope.CodeServerError, e.Code)
	assert.Equal(t, "RATE_LIMITED", e.Data.Code)
}

func TestDeniedMessageSpendsNoTokenOfAnotherLimit(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{
		// Limits are applied in name order: "a_all" takes before "b_search"
		// denies.
		"a_all":    {Rate: "2/1h"},
		"b_search": {Rate: "1/1h", Tools: []string{"search"}},
	})})
	u := &upstream{}
	call := func(tool string) *httptest.ResponseRecorder { return serve(t, h, post(toolsCall(`1`, tool)), u) }

	requireForwarded(t, u, 1, call("search")) // a_all 1 left, b_search 0 left

	w := call("search")
	require.Equal(t, 1, u.calls)
	env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
	assert.Equal(t, envelope.Detail{Key: "limit", Value: "b_search"}, env.Details[0], "the denying limit is named")

	requireForwarded(t, u, 2, call("fetch")) // the refused call left a_all its token

	w = call("fetch")
	require.Equal(t, 2, u.calls)
	env, _ = toolError(t, members(t, w.Body.Bytes())["result"])
	assert.Equal(t, envelope.Detail{Key: "limit", Value: "a_all"}, env.Details[0])
	assert.Equal(t, "Rate limit exceeded: 2 calls per 1h for this client", env.Message)
}

func TestBatchTakesOneTokenPerCountedMessage(t *testing.T) {
	h := limited(t, RateLimit{Rate: "3/1h"})
	u := &upstream{}

	first := `[` + toolsCall(`1`, "a") + `,{"jsonrpc":"2.0","method":"notifications/progress"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"},` + toolsCall(`3`, "b") + `]`
	requireForwarded(t, u, 1, serve(t, h, post(first), u)) // two calls: 1 token left
	assert.Equal(t, first, string(u.body))

	second := `[` + toolsCall(`"four"`, "a") + `,{"jsonrpc":"2.0","method":"notifications/progress"},` +
		`{"jsonrpc":"2.0","id":"five","method":"tools/list"},{"jsonrpc":"2.0","id":"srv-1","result":{}},` +
		toolsCall(`6`, "b") + `]`
	w := serve(t, h, post(second), u)
	require.Equal(t, 1, u.calls, "two calls cost two tokens; one is left")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.NotEmpty(t, w.Header().Get("Retry-After"))

	var answers []json.RawMessage
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &answers), "a batch is answered with an array: %s", w.Body)
	require.Len(t, answers, 3, "one answer per request; notifications and responses get none")

	m := members(t, answers[0])
	assert.Equal(t, `"four"`, string(m["id"]))
	env, isError := toolError(t, m["result"])
	assert.True(t, isError)
	assert.Equal(t, envelope.RateLimited, env.Code)

	m = members(t, answers[1])
	assert.Equal(t, `"five"`, string(m["id"]))
	assert.Equal(t, "RATE_LIMITED", decodeRPCError(t, m["error"]).Data.Code, "a request the limit does not count shares its batch's fate")

	m = members(t, answers[2])
	assert.Equal(t, `6`, string(m["id"]))
	_, isError = toolError(t, m["result"])
	assert.True(t, isError)

	requireForwarded(t, u, 2, serve(t, h, post(toolsCall(`7`, "a")), u)) // the refused batch took nothing
	assert.Equal(t, http.StatusOK, serve(t, h, post(toolsCall(`8`, "a")), u).Code)
	assert.Equal(t, 2, u.calls)
}

func TestDeniedBatchOfNotificationsGets429WithoutID(t *testing.T) {
	h := limited(t, RateLimit{Rate: "2/10s", Methods: []string{"notifications/progress"}})
	u := &upstream{}
	note := `{"jsonrpc":"2.0","method":"notifications/progress"}`
	requireForwarded(t, u, 1, serve(t, h, post(note), u))

	w := serve(t, h, post("["+note+","+note+"]"), u)
	assert.Equal(t, 1, u.calls, "one token is left, the batch needs two")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
	m := members(t, w.Body.Bytes())
	assert.NotContains(t, m, "id")
	assert.Equal(t, "RATE_LIMITED", decodeRPCError(t, m["error"]).Data.Code)
}

func TestBatchBeyondBurstIsToldItCanNeverPass(t *testing.T) {
	// Waiting cannot help a batch that needs more tokens than the bucket
	// holds: the model is told to split it, with no retry_after.
	h := limited(t, RateLimit{Rate: "2/10s"})
	u := &upstream{}
	batch := "[" + toolsCall(`1`, "a") + "," + toolsCall(`2`, "a") + "," + toolsCall(`3`, "a") + "]"

	w := serve(t, h, post(batch), u)
	assert.Zero(t, u.calls)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, w.Header().Get("Retry-After"))
	var answers []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &answers))
	require.Len(t, answers, 3)
	env, isError := toolError(t, answers[0]["result"])
	assert.True(t, isError)
	assert.Equal(t, "Rate limit exceeded: this batch counts 3 calls against the limit per_client, which allows at most 2 at once (2 calls per 10s), so it can never pass as one request", env.Message)
	assert.Equal(t, "Split the batch into requests of at most 2 calls each, or send them one at a time.", env.Recovery)
	assert.False(t, env.HasRetryAfter())
	requireForwarded(t, u, 1, serve(t, h, post(toolsCall(`4`, "a")), u))
}

func TestEmptyBatchPassesThrough(t *testing.T) {
	h := limited(t, RateLimit{Rate: "1/10s"})
	u := &upstream{}
	requireForwarded(t, u, 1, serve(t, h, post(`[]`), u))
	assert.Equal(t, `[]`, string(u.body), "an empty batch is the upstream's to refuse")
}

func TestToolKeyGivesEachToolItsOwnBucket(t *testing.T) {
	h := limited(t, RateLimit{Rate: "1/1m", Key: "{http.mcp.tool}"})
	u := &upstream{}

	requireForwarded(t, u, 1, serve(t, h, post(toolsCall(`1`, "search")), u))
	requireForwarded(t, u, 2, serve(t, h, post(toolsCall(`2`, "fetch")), u))
	w := serve(t, h, post(toolsCall(`3`, "search"), fromClient("198.51.100.1")), u)
	require.Equal(t, 2, u.calls, "the key is the tool, whoever calls it")
	env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
	assert.Equal(t, "Rate limit exceeded: 1 call per 1m for this tool", env.Message)
}

func TestDefaultKeyGivesEachClientItsOwnBucket(t *testing.T) {
	h := limited(t, RateLimit{Rate: "1/1m"})
	u := &upstream{}

	requireForwarded(t, u, 1, serve(t, h, post(toolsCall(`1`, "search")), u))
	requireForwarded(t, u, 2, serve(t, h, post(toolsCall(`1`, "search"), fromClient("198.51.100.1")), u))
	w := serve(t, h, post(toolsCall(`1`, "search")), u)
	require.Equal(t, 2, u.calls)
	env, _ := toolError(t, members(t, w.Body.Bytes())["result"])
	assert.Equal(t, "Rate limit exceeded: 1 call per 1m for this client", env.Message)
}

func TestPlaceholdersDescribeTheMessageInsideNext(t *testing.T) {
	ask := []string{
		"{http.mcp.method}", "{http.mcp.tool}", "{http.mcp.id}", "{http.mcp.session_id}",
		"{http.mcp.protocol_version}", "{http.mcp.batch_size}", "{http.mcp.error_code}",
	}
	tests := []struct {
		name string
		body string
		opts []func(*http.Request)
		want []string // in the order of ask
	}{
		{
			name: "call with a string id",
			body: `{"jsonrpc":"2.0","id":"req-\"7\"\u00e9","method":"tools\/call","params":{"name":"search\u005fweb"}}`,
			opts: []func(*http.Request){header("Mcp-Session-Id", "sess-42"), header("MCP-Protocol-Version", "2025-11-25")},
			want: []string{"tools/call", "search_web", `req-"7"é`, "sess-42", "2025-11-25", "", ""},
		},
		{
			name: "request with a number id",
			body: `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"tools/list"}`,
			opts: []func(*http.Request){func(r *http.Request) { r.Header["mcp-session-id"] = []string{"lower"} }},
			want: []string{"tools/list", "", "12345678901234567890123", "", "", "", ""},
		},
		{
			name: "notification",
			body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			want: []string{"notifications/initialized", "", "", "", "", "", ""},
		},
		{
			name: "batch shows its first message",
			body: `[` + toolsCall(`"b-1"`, "fetch") + `,{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
			want: []string{"tools/call", "fetch", "b-1", "", "", "2", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "10/1s"})
			u := &upstream{ask: ask}
			requireForwarded(t, u, 1, serve(t, h, post(tt.body, tt.opts...), u))
			for i, p := range ask {
				assert.Equal(t, tt.want[i], u.resolved[p], p)
			}
		})
	}
}

func TestPlaceholdersResolveWithoutLimits(t *testing.T) {
	h := provision(t, &Handler{})
	u := &upstream{ask: []string{"{http.mcp.method}", "{http.mcp.tool}"}}
	requireForwarded(t, u, 1, serve(t, h, post(toolsCall(`1`, "search")), u))
	assert.Equal(t, map[string]string{"{http.mcp.method}": "tools/call", "{http.mcp.tool}": "search"}, u.resolved)
}

func TestBodyOverMaxRequestBodyGets413(t *testing.T) {
	const max = 96
	fits := toolsCall(`1`, "search")
	fits = fits[:len(fits)-1] + strings.Repeat(" ", max-len(fits)) + "}"
	require.Len(t, fits, max)
	for _, length := range []string{"known", "chunked"} {
		t.Run(length, func(t *testing.T) {
			opts := []func(*http.Request){}
			if length == "chunked" {
				opts = append(opts, chunked)
			}
			h := provision(t, &Handler{MaxRequestBody: max})
			u := &upstream{}

			requireForwarded(t, u, 1, serve(t, h, post(fits, opts...), u))
			assert.Equal(t, fits, string(u.body), "a body of exactly max_request_body passes")

			w := serve(t, h, post(fits+" ", opts...), u)
			assert.Equal(t, 1, u.calls)
			assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			m := members(t, w.Body.Bytes())
			assert.NotContains(t, m, "id", "a body that was not read has no id")
			e := decodeRPCError(t, m["error"])
			assert.Equal(t, envelope.CodeInvalidRequest, e.Code)
			assert.Equal(t, "VALIDATION_ERROR", e.Data.Code)
			assert.Contains(t, e.Message, "96 bytes")
		})
	}
}

// endless is a body that never ends, counting what was read of it.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.read += int64(len(p))
	return len(p), nil
}

func TestOversizedChunkedBodyIsReadNoFurtherThanTheLimit(t *testing.T) {
	const max = 1 << 10
	h := provision(t, &Handler{MaxRequestBody: max})
	body := &endless{}
	r := post("", chunked, func(r *http.Request) { r.Body = io.NopCloser(body) })
	u := &upstream{}
	w := serve(t, h, r, u)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Equal(t, 0, u.calls)
	assert.LessOrEqual(t, body.read, int64(max+1))
}

func TestDefaultMaxRequestBodyIs4MiB(t *testing.T) {
	h := provision(t, &Handler{})
	assert.Equal(t, int64(4<<20), h.MaxRequestBody)
	assert.Error(t, (&Handler{MaxRequestBody: -1}).Validate())
}

func TestMalformedJSONGets400ParseErrorWithNullID(t *testing.T) {
	tests := []struct {
		name string
		body string
		opts []func(*http.Request)
	}{
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"tools/call"`, nil},
		{"trailing garbage", toolsCall(`1`, "search") + `x`, nil},
		{"empty body", ``, nil},
		{"no content type", `{"id":1,`, []func(*http.Request){func(r *http.Request) { r.Header.Del("Content-Type") }}},
		{"json with parameters", `{"id":1,`, []func(*http.Request){header("Content-Type", "Application/JSON; charset=utf-8")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			u := &upstream{}
			w := serve(t, h, post(tt.body, tt.opts...), u)
			assert.Equal(t, 0, u.calls)
			assert.Equal(t, http.StatusBadRequest, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			m := members(t, w.Body.Bytes())
			assert.Equal(t, "null", string(m["id"]), "the id could not be read, so it is null")
			e := decodeRPCError(t, m["error"])
			assert.Equal(t, envelope.CodeParseError, e.Code)
			assert.Equal(t, "VALIDATION_ERROR", e.Data.Code)
			assert.Contains(t, e.Message, "not valid JSON")
		})
	}
}

func TestBodyThatIsNotJSONAndDoesNotClaimToBePassesUntouched(t *testing.T) {
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/jsonl"} {
		t.Run(ct, func(t *testing.T) {
			h := provision(t, &Handler{})
			u := &upstream{}
			body := "hello, \xffworld\n{"
			requireForwarded(t, u, 1, serve(t, h, post(body, header("Content-Type", ct)), u))
			assert.Equal(t, body, string(u.body), "the upstream refuses it in its own words")
		})
	}
}

func TestAmbiguousMessageGets400(t *testing.T) {
	bodies := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call","params":{"name":"search"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cheap","NAME":"expensive"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cheap"},"paramſ":{"name":"expensive"}}`,
	}
	for _, body := range bodies {
		t.Run(body, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "100/1s"})
			u := &upstream{}
			w := serve(t, h, post(body, header("Content-Type", "text/plain")), u)
			assert.Equal(t, 0, u.calls, "whatever the content type")
			assert.Equal(t, http.StatusBadRequest, w.Code)
			m := members(t, w.Body.Bytes())
			e := decodeRPCError(t, m["error"])
			assert.Equal(t, envelope.CodeInvalidRequest, e.Code)
			assert.Equal(t, "VALIDATION_ERROR", e.Data.Code)
			assert.Contains(t, e.Message, "ambiguous")
		})
	}
}

// countingBody records whether anyone read it.
type countingBody struct {
	io.Reader
	reads int
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads++
	return b.Reader.Read(p)
}

func (b *countingBody) Close() error { return nil }

func TestGetAndDeletePassThroughUnread(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "1/1h"})
			u := &upstream{}
			for i := range 2 {
				body := &countingBody{Reader: strings.NewReader(toolsCall(`1`, "search"))}
				r := newRequest(method, "", header("Mcp-Session-Id", "sess-1"), header("Last-Event-ID", "7"))
				r.Body = body
				next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
					assert.Zero(t, body.reads, "the handler never reads a %s body", method)
					assert.Same(t, body, r.Body, "the body is the client's own")
					assert.Equal(t, "7", r.Header.Get("Last-Event-ID"))
					return u.ServeHTTP(w, r)
				})
				requireForwarded(t, u, i+1, serve(t, h, r, next))
			}
		})
	}
}

func TestUpstreamReceivesTheBodyByteForByte(t *testing.T) {
	bodies := map[string]string{
		"odd whitespace": " \r\n\t{ \"jsonrpc\" :\"2.0\",\n\"id\"\t:\r1 , \"method\":\"tools/call\" ,\"params\":{\"name\":\"search\"} }\n\n",
		"unicode escapes": `{"jsonrpc":"2.0","id":"\u0031","method":"tools\/call","params":{"name":"search","arguments":` +
			`{"q":"\u00e9\ud83d\ude00\u0000\"\\\/\b\f\n\r\t","raw":"é😀"}}}`,
		"numbers as written": `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"tools/call","params":{"name":"n",` +
			`"arguments":{"a":1.50,"b":-0.0e+00,"c":1E400}}}`,
		"invalid UTF-8 in a string":   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{\"b\":\"\xff\xfe\"}}}",
		"batch":                       "[\n" + toolsCall(`1`, "a") + " ,\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n]",
		"response from the client":    `{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[{"uri":"file:///x"}]}}`,
		"valid JSON but not JSON-RPC": `{"hello":["world",1,true,null]}`,
		"large":                       string(wire.ToolsCallOfSize(64 << 10)),
	}
	for name, body := range bodies {
		for _, length := range []string{"known", "chunked"} {
			t.Run(name+"/"+length, func(t *testing.T) {
				h := limited(t, RateLimit{Rate: "100/1s"})
				var opts []func(*http.Request)
				if length == "chunked" {
					opts = append(opts, chunked)
				}
				u := &upstream{}
				requireForwarded(t, u, 1, serve(t, h, post(body, opts...), u))
				assert.Equal(t, []byte(body), u.body)
				assert.Equal(t, int64(len(body)), u.contentLength, "the upstream learns the length")
				assert.Empty(t, u.request.TransferEncoding)
			})
		}
	}
}

func TestMethodsAndNamesBeyondTheirBoundsAreRefusedWithTheirIDs(t *testing.T) {
	h := provision(t, &Handler{})
	u := &upstream{}
	for _, tt := range []struct {
		body, message, recovery string
	}{
		{
			`{"jsonrpc":"2.0","id":"m","method":"x/` + strings.Repeat("m", 127) + `"}`,
			"Request refused: a method name is 129 bytes long; this server takes method names of at most 128",
			"Use a method the MCP specification or the server defines.",
		},
		{
			`{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"` + strings.Repeat("p", 129) + `"}}`,
			"Request refused: a name (params.name) is 129 characters long; this server takes names of at most 128",
			"Use a name exactly as the server lists it (tools/list, prompts/list).",
		},
	} {
		w := serve(t, h, post(tt.body), u)
		assert.Equal(t, http.StatusOK, w.Code, "the id is fine: the request gets its answer")
		m := members(t, w.Body.Bytes())
		e := decodeRPCError(t, m["error"])
		assert.Equal(t, tt.message, e.Message)
		assert.Equal(t, tt.recovery, e.Data.Recovery)
	}
	assert.Zero(t, u.calls)
	requireForwarded(t, u, 1, serve(t, h, post(`{"jsonrpc":"2.0","id":1,"method":"x/`+strings.Repeat("m", 126)+`"}`), u))
}

// A large body streams to the upstream as it arrives only while no
// feature needs it whole first: validate reads a call's arguments, and a
// guard's place taken on a body's head could be held by a client that
// trickles the rest.
func TestALargeBodyStreamsOnlyWhileNoFeatureNeedsItWhole(t *testing.T) {
	tests := []struct {
		name    string
		h       *Handler
		streams bool
	}{
		{"nothing configured", &Handler{}, true},
		{"a rate limit", &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"streams_limited": {Rate: "1/s"}})}, true},
		{"a concurrency guard", &Handler{FeaturesRaw: features(t, "concurrency", &Concurrency{Max: 1})}, false},
		{"validate", &Handler{FeaturesRaw: features(t, "validate", &Validate{})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, tt.h)
			r := post(toolsCall(`1`, "search"))
			r.ContentLength = DefaultStreamAbove
			assert.False(t, h.streams(r), "a body of stream_above is read whole")
			r.ContentLength = DefaultStreamAbove + 1
			assert.Equal(t, tt.streams, h.streams(r))
		})
	}
}
