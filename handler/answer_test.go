package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/mirror"
	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

func syntaxError(t *testing.T) *jsonrpc.SyntaxError {
	t.Helper()
	_, _, err := jsonrpc.Parse([]byte(`{"id":`), nil, 1)
	var s *jsonrpc.SyntaxError
	require.ErrorAs(t, err, &s)
	return s
}

func TestEveryRefusedBodyHasItsStatusCodeAndID(t *testing.T) {
	h := &Handler{MaxRequestBody: 1 << 20, MaxBatch: 16, ReadBodyTimeout: caddy.Duration(10 * time.Second)}
	tests := []struct {
		name    string
		err     error
		r       *http.Request
		status  int
		code    int
		id      json.RawMessage
		message string
		parsed  bool
		perReq  bool
	}{
		{name: "a body too large has no id: it was not read", err: reqbody.ErrTooLarge,
			status: 413, code: envelope.CodeInvalidRequest, message: "Request body is larger than the 1048576 bytes this server accepts"},
		{name: "a body too slow has no id either", err: reqbody.ErrTimeout,
			status: 408, code: envelope.CodeInvalidRequest, message: "Request body did not arrive within 10s"},
		{name: "an input given twice, refused before reading", err: &feature.RepeatError{What: "the Mcp-Name header", Count: 3},
			status: 400, code: envelope.CodeInvalidRequest, message: "Request is ambiguous: the Mcp-Name header is given 3 times"},
		{name: "a compressed body", err: errEncoded, r: post("", header("Content-Encoding", "gzip"), func(r *http.Request) { r.Header.Add("Content-Encoding", "br") }),
			status: 415, code: envelope.CodeInvalidRequest, id: envelope.NullID, message: "Request body is sent with Content-Encoding gzip, br: this server reads every request before it runs, and takes them uncompressed only"},
		{name: "a body that is not JSON", err: syntaxError(t),
			status: 400, code: envelope.CodeParseError, id: envelope.NullID, message: "Request body is not valid JSON: " + syntaxError(t).Error()},
		{name: "an ambiguous message", err: jsonrpc.ErrAmbiguous,
			status: 400, code: envelope.CodeInvalidRequest, id: envelope.NullID, message: messageAmbiguous().Message},
		{name: "headers disagreeing with the body: the request's id, and MCP's HeaderMismatch", err: &mirror.Mismatch{Msg: "x", ID: json.RawMessage(`7`)},
			status: 400, code: -32020, id: json.RawMessage(`7`), parsed: true, message: "Request headers disagree with its body: x"},
		{name: "a batch over max_batch", err: jsonrpc.ErrTooManyMessages,
			status: 400, code: envelope.CodeInvalidRequest, id: envelope.NullID, parsed: true, message: "Request is a batch of more than 16 messages, the most this server takes in one request"},
		{name: "an id that cannot be echoed", err: &messageError{msg: "an id is 300 bytes long", badID: true},
			status: 400, code: envelope.CodeInvalidRequest, id: envelope.NullID, parsed: true, message: "Request refused: an id is 300 bytes long"},
		{name: "a method too long: each request gets its answer", err: &messageError{msg: "a method name is 200 bytes long"},
			status: 400, code: envelope.CodeInvalidRequest, id: envelope.NullID, parsed: true, perReq: true, message: "Request refused: a method name is 200 bytes long"},
		{name: "a wrapped error is recognised", err: fmt.Errorf("reading: %w", reqbody.ErrTooLarge),
			status: 413, code: envelope.CodeInvalidRequest, message: "Request body is larger than the 1048576 bytes this server accepts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			if r == nil {
				r = post("")
			}
			ref, ok := h.refusalOf(r, sessionEra, tt.err)
			require.True(t, ok)
			assert.Equal(t, tt.status, ref.status)
			assert.Equal(t, tt.code, ref.code)
			assert.Equal(t, tt.id, ref.id, "nil: the id member is left out")
			assert.Equal(t, tt.parsed, ref.parsed)
			assert.Equal(t, tt.perReq, ref.perRequest)
			assert.Equal(t, envelope.ValidationError, ref.env.Code)
			assert.Equal(t, tt.message, ref.env.Message)
		})
	}
}

func TestABodyThatCouldNotBeReadIsNobodysToAnswer(t *testing.T) {
	h := &Handler{}
	for _, err := range []error{io.ErrUnexpectedEOF, errors.New("http: request body too large?"), os.ErrDeadlineExceeded} {
		_, ok := h.refusalOf(post(""), sessionEra, err)
		assert.False(t, ok, "%v", err)
	}
}

// answerTo answers body with env through h.answer, as the gateway does.
func answerTo(t *testing.T, body string, env envelope.Envelope, status int) (*httptest.ResponseRecorder, *exchange) {
	t.Helper()
	h := provision(t, &Handler{})
	x := &exchange{Exchange: feature.Exchange{Request: post(body), Start: time.Now()}}
	if body != "" {
		var err error
		x.Messages, x.Batch, err = jsonrpc.Parse([]byte(body), nil, 1<<10)
		require.NoError(t, err)
	}
	w := httptest.NewRecorder()
	require.NoError(t, h.answer(w, x, &env, status))
	return w, x
}

func TestAnswerTakesTheFormEachRequestNeeds(t *testing.T) {
	env := envelope.Envelope{Code: envelope.RateLimited, Severity: envelope.SeverityError, Message: "Rate limit exceeded", Recovery: "Wait 5 seconds, then retry the same call.", RetryAfter: 5}
	batchOf := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = toolsCall(fmt.Sprint(i), "t")
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	tests := []struct {
		name   string
		body   string
		status int
		// answers: "result <id>" or "error <id>" per answer; nil for the
		// id-less form, whose id member is idLess.
		answers []string
		idLess  string
	}{
		{name: "a call gets a result", body: toolsCall(`"c"`, "t"), status: 200, answers: []string{`result "c"`}},
		{name: "another request gets an error with its id", body: listOne, status: 200, answers: []string{`error "l"`}},
		{name: "a batch gets one answer per request, in order", body: "[" + listOne + "," + notification + "," + callOne + `,{"jsonrpc":"2.0","id":9,"result":{}}]`,
			status: 200, answers: []string{`error "l"`, `result 1`}},
		{name: "a notification gets the id-less form", body: notification, status: 429, idLess: "absent"},
		{name: "a batch of notifications too", body: "[" + notification + "," + notification + "]", status: 429, idLess: "absent"},
		{name: "nothing at all (a GET)", body: "", status: 429, idLess: "absent"},
		{name: "up to maxAnswered requests are answered each", body: batchOf(maxAnswered), status: 200, answers: func() []string {
			out := make([]string, maxAnswered)
			for i := range out {
				out[i] = fmt.Sprintf("result %d", i)
			}
			return out
		}()},
		{name: "more get one envelope with a null id", body: batchOf(maxAnswered + 1), status: 429, idLess: "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, x := answerTo(t, tt.body, env, 429)
			assert.Equal(t, tt.status, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.Equal(t, fmt.Sprint(w.Body.Len()), w.Header().Get("Content-Length"))
			assert.Equal(t, "5", w.Header().Get("Retry-After"))
			assert.Equal(t, "RATE_LIMITED", x.errorCode, "the error_code placeholder")
			if tt.answers == nil {
				m := members(t, w.Body.Bytes())
				if tt.idLess == "absent" {
					assert.NotContains(t, m, "id")
				} else {
					assert.Equal(t, tt.idLess, string(m["id"]))
				}
				assert.Equal(t, "RATE_LIMITED", decodeRPCError(t, m["error"]).Data.Code)
				return
			}
			var raw []json.RawMessage
			if x.Batch {
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &raw))
			} else {
				raw = []json.RawMessage{w.Body.Bytes()}
			}
			require.Len(t, raw, len(tt.answers))
			for i, a := range raw {
				m := members(t, a)
				kind := "error"
				if _, ok := m["result"]; ok {
					kind = "result"
				}
				assert.Equal(t, tt.answers[i], kind+" "+string(m["id"]))
			}
		})
	}
}

func TestAnswerWithoutADelayHasNoRetryAfter(t *testing.T) {
	w, _ := answerTo(t, callOne, bodyTooLarge(10), 413)
	assert.Empty(t, w.Header().Get("Retry-After"))
}

func TestConnectionClosesAfterAnAnswerOnlyOverHTTP1(t *testing.T) {
	for major, want := range map[int]string{1: "close", 2: "", 3: ""} {
		r := post("")
		r.ProtoMajor = major
		w := httptest.NewRecorder()
		closeAfterAnswer(w, r)
		assert.Equal(t, want, w.Header().Get("Connection"), "HTTP/%d", major)
	}
}

// deadlineWriter is a response writer whose connection takes read
// deadlines, as net/http's does.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.deadlines = append(w.deadlines, t)
	return nil
}

// wrapped is a response writer wrapping another, as Caddy's are.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// failingBody is a body whose read fails with err.
type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }
func (b failingBody) Close() error             { return nil }

func TestRefusedRequestsOverTheWire(t *testing.T) {
	longID := `"` + strings.Repeat("i", maxIDBytes) + `"`
	tests := []struct {
		name   string
		h      Handler
		r      func() *http.Request
		status int
		// id is the answer's id member: "absent", "null" or the id.
		id      string
		message string
		closes  bool
	}{
		{name: "a foreign origin", r: func() *http.Request { return post(callOne, header("Origin", "http://evil.example.com")) },
			status: 403, id: "absent", message: `Requests from the web origin "http://evil.example.com" are not allowed by this MCP gateway`, closes: true},
		{name: "a body over a limit Caddy enforces", r: func() *http.Request {
			return post("", func(r *http.Request) {
				r.Body = http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(callOne)), 8)
				r.ContentLength = -1
			})
		}, status: 413, id: "absent", message: "Request body is larger than the 4194304 bytes this server accepts", closes: true},
		{name: "a header given twice", r: func() *http.Request {
			return post(callOne, func(r *http.Request) { r.Header["Mcp-Session-Id"] = []string{"a", "b"} })
		}, status: 400, id: "absent", message: "Request is ambiguous: the Mcp-Session-Id header is given 2 times", closes: true},
		{name: "a compressed body while a limit applies", h: Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"wire_gzip": {Rate: "1/s"}})},
			r: func() *http.Request { return post(callOne, header("Content-Encoding", "gzip")) }, status: 415, id: "null",
			message: "Request body is sent with Content-Encoding gzip: this server reads every request before it runs, and takes them uncompressed only"},
		{name: "a body that does not claim JSON while a limit applies", h: Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"wire_text": {Rate: "1/s"}})},
			r: func() *http.Request { return post("hello", header("Content-Type", "text/plain")) }, status: 400, id: "null",
			message: "Request body is not JSON (Content-Type text/plain): this server reads every request before it runs, and could not read it: invalid JSON at offset 0: unexpected 'h'"},
		{name: "an id too long", r: func() *http.Request { return post(`{"jsonrpc":"2.0","id":` + longID + `,"method":"ping"}`) },
			status: 400, id: "null", message: "Request refused: an id is 258 bytes long; this server takes ids of at most 256"},
		{name: "a NaN id", r: func() *http.Request { return post(`{"jsonrpc":"2.0","id":NaN,"method":"ping"}`) },
			status: 400, id: "null", message: "Request refused: an id is NaN, which is not a string or a number"},
		{name: "a batch over max_batch", h: Handler{MaxBatch: 2},
			r:      func() *http.Request { return post("[" + listOne + "," + listOne + "," + listOne + "]") },
			status: 400, id: "null", message: "Request is a batch of more than 2 messages, the most this server takes in one request"},
		{name: "a tool name too long gets an answer with its id", r: func() *http.Request { return post(toolsCall(`"n"`, strings.Repeat("t", maxName+1))) },
			status: 200, id: `"n"`, message: "Request refused: a tool name is 129 characters long; MCP tool names have at most 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &tt.h)
			u := &upstream{}
			w := serve(t, h, tt.r(), u)
			assert.Zero(t, u.calls)
			assert.Equal(t, tt.status, w.Code, "%s", w.Body)
			if tt.closes {
				assert.Equal(t, "close", w.Header().Get("Connection"), "answered before the body was read: the connection closes")
			} else {
				assert.Empty(t, w.Header().Get("Connection"))
			}
			m := members(t, w.Body.Bytes())
			switch tt.id {
			case "absent":
				assert.NotContains(t, m, "id")
			default:
				assert.Equal(t, tt.id, string(m["id"]))
			}
			message := ""
			if res, ok := m["result"]; ok {
				env, _ := toolError(t, res)
				message = env.Message
			} else {
				message = decodeRPCError(t, m["error"]).Message
			}
			assert.Equal(t, tt.message, message)
		})
	}
}

func TestABodyThatDoesNotArriveInTimeGets408(t *testing.T) {
	h := provision(t, &Handler{ReadBodyTimeout: caddy.Duration(3 * time.Second)})
	r := post("", func(r *http.Request) { r.Body = failingBody{os.ErrDeadlineExceeded}; r.ContentLength = -1 })
	dw := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
	before := time.Now()
	u := &upstream{}
	require.NoError(t, h.ServeHTTP(wrapped{dw}, r, u))
	after := time.Now()
	assert.Zero(t, u.calls)
	assert.Equal(t, http.StatusRequestTimeout, dw.Code)
	assert.Equal(t, "close", dw.Header().Get("Connection"))
	require.Len(t, dw.deadlines, 2, "set for the body, then lifted")
	assert.False(t, dw.deadlines[0].Before(before.Add(3*time.Second)), "read_body_timeout after the handler began")
	assert.False(t, dw.deadlines[0].After(after.Add(3*time.Second)), "read_body_timeout after the handler began")
	assert.True(t, dw.deadlines[1].IsZero(), "lifted, so that it cannot end the response")
	e := decodeRPCError(t, members(t, dw.Body.Bytes())["error"])
	assert.Equal(t, "Request body did not arrive within 3s", e.Message)
}

func TestATimeoutWithoutADeadlineIsABrokenBody(t *testing.T) {
	h := provision(t, &Handler{})
	r := post("", func(r *http.Request) { r.Body = failingBody{os.ErrDeadlineExceeded}; r.ContentLength = -1 })
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, r, &upstream{})
	var he caddyhttp.HandlerError
	require.ErrorAs(t, err, &he, "the recorder takes no deadline: the handler set none, so the timeout is not its own")
	assert.Equal(t, http.StatusBadRequest, he.StatusCode)
	assert.Zero(t, w.Body.Len())
}

func TestABrokenBodyIsNotAnswered(t *testing.T) {
	h := provision(t, &Handler{})
	r := post("", func(r *http.Request) { r.Body = failingBody{io.ErrUnexpectedEOF}; r.ContentLength = 100 })
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, r, &upstream{})
	var he caddyhttp.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusBadRequest, he.StatusCode)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Zero(t, w.Body.Len(), "the client broke the framing: nobody to answer")
}

func TestACompressedBodyPassesWhenNothingLimitsIt(t *testing.T) {
	for _, enc := range []string{"gzip", "identity, gzip"} {
		h := provision(t, &Handler{})
		u := &upstream{}
		requireForwarded(t, u, 1, serve(t, h, post("\x1f\x8b\x08binary", header("Content-Encoding", enc)), u))
		assert.Equal(t, "\x1f\x8b\x08binary", string(u.body), "the upstream decodes it, or refuses it")
	}
	h := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"identity_ok": {Rate: "1/s"}})})
	u := &upstream{}
	requireForwarded(t, u, 1, serve(t, h, post(callOne, header("Content-Encoding", "identity")), u))
}

func TestPlaceholdersOutliveTheRecycledBody(t *testing.T) {
	h := provision(t, &Handler{})
	body := `[` + toolsCall(`"big"`, "search") + `,` + listOne + `]` + strings.Repeat(" ", 8<<10)
	r := post(body)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close() // as the transport does once sent
		_, err := io.WriteString(w, upstreamAnswer)
		return err
	})
	serve(t, h, r, next)
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	for p, want := range map[string]string{
		"http.mcp.method": "tools/call", "http.mcp.tool": "search", "http.mcp.id": "big", "http.mcp.batch_size": "2",
	} {
		got, _ := repl.GetString(p)
		assert.Equal(t, want, got, "%s, read by log_append after the handler returned", p)
	}
}
