package handler

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/own"
)

// Reopening a lost session against upstreams and clients that misbehave.

const hostileSecret = "a-secret-of-enough-length-0123456789"

const clientInitialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`

// openSession opens a session through h on upstream session "s1", and
// returns the token the client got.
func openSession(t *testing.T, h *Handler) string {
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Mcp-Session-Id", "s1")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
		return nil
	})
	require.NoError(t, h.ServeHTTP(w, post(clientInitialize), next))
	tok := w.Header().Get("Mcp-Session-Id")
	require.NotEmpty(t, tok)
	return tok
}

// lostSession is an upstream that lost session s1: it answers 404 to it,
// reopens with initialize as s2 (or as reopen says), and counts the calls
// it runs.
type lostSession struct {
	calls, inits atomic.Int32
	// reopen answers the gateway's initialize, when set.
	reopen func(w http.ResponseWriter, r *http.Request)
	// notFound is the 404's body and type (default: plain text).
	notFound, notFoundType string
}

func (u *lostSession) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	body, _ := io.ReadAll(r.Body)
	s := string(body)
	switch {
	case strings.Contains(s, `"caddy-mcp-reopen"`):
		u.inits.Add(1)
		if u.reopen != nil {
			u.reopen(w, r)
			return nil
		}
		w.Header().Set("Mcp-Session-Id", "s2")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"caddy-mcp-reopen","result":{}}`)
	case strings.Contains(s, "notifications/"):
		w.WriteHeader(http.StatusAccepted)
	case r.Header.Get("Mcp-Session-Id") == "s1" && u.notFound == "":
		http.Error(w, "session not found", http.StatusNotFound)
	default:
		u.calls.Add(1)
		reachUpstream(r)
		if u.notFound != "" {
			w.Header().Set("Content-Type", u.notFoundType)
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, u.notFound)
			return nil
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, upstreamAnswer)
	}
	return nil
}

// A 404 that is the server's own JSON-RPC answer to the call (MCP
// 2026-07-28 answers an unknown method so, and the Go SDK a tool's -32601)
// says the server read the call, and may have run it: it is passed, never
// sent again. In 2026-07-28 a 404 is never a lost session.
func TestA404ThatAnswersTheCallIsNotAReopen(t *testing.T) {
	for name, c := range map[string]struct{ version, body, ctype string }{
		"a response, 2025-11-25": {"2025-11-25", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`, "application/json"},
		"a response, 2026-07-28": {"2026-07-28", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`, "application/json"},
		"plain, 2026-07-28":      {"2026-07-28", "not found", "text/plain"},
	} {
		t.Run(name, func(t *testing.T) {
			h := provision(t, &Handler{FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}})})
			tok := openSession(t, h)
			u := &lostSession{notFound: c.body, notFoundType: c.ctype}
			w := httptest.NewRecorder()
			r := post(callOne, header("Mcp-Session-Id", tok), header("Mcp-Protocol-Version", c.version), header("Mcp-Method", "tools/call"), header("Mcp-Name", "search"))
			require.NoError(t, h.ServeHTTP(w, r, u))
			assert.Equal(t, int32(1), u.calls.Load(), "the call ran once")
			assert.Zero(t, u.inits.Load(), "no session was reopened")
			assert.Equal(t, http.StatusNotFound, w.Code)
		})
	}
}

// A client that leaves while its session is reopened: its call is not
// sent again for nobody, and the cancellation the gateway sends for it
// goes out with the header the request went upstream with, while the
// request's own header is rewritten for the new session (-race checks the
// two never meet).
func TestAClientThatLeftWhileItsSessionIsReopenedIsNotSentAgain(t *testing.T) {
	h := provision(t, &Handler{
		FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}},
			"concurrency", &Concurrency{Max: 10, CancelGrace: caddy.Duration(time.Hour)}),
	})
	tok := openSession(t, h)
	r := post(callOne, header("Mcp-Session-Id", tok), header("Mcp-Protocol-Version", "2025-11-25"))
	ctx, leave := context.WithCancel(r.Context())
	defer leave()
	r = r.WithContext(ctx)
	cancelled := make(chan string, 4)
	u := &lostSession{}
	u.reopen = func(w http.ResponseWriter, _ *http.Request) {
		leave()
		w.Header().Set("Mcp-Session-Id", "s2")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"caddy-mcp-reopen","result":{}}`)
	}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get("Mcp-Session-Id") == "s1" && r.ContentLength > 0 {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte("notifications/cancelled")) {
				cancelled <- r.Header.Get("Mcp-Session-Id")
				w.WriteHeader(http.StatusAccepted)
				return nil
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			reachUpstream(r)
		}
		return u.ServeHTTP(w, r)
	})
	_ = h.ServeHTTP(httptest.NewRecorder(), r, next)
	assert.Zero(t, u.calls.Load(), "the call was not sent again")
	// ServeHTTP returns once the client's leaving was dealt with.
	require.Len(t, cancelled, 1)
	assert.Equal(t, "s1", <-cancelled)
}

// An upstream whose new session id is longer than the gateway keeps: the
// reopen fails, and the client gets the 404.
func TestAReopenedSessionIDTooLongIsRefused(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}})})
	tok := openSession(t, h)
	u := &lostSession{reopen: func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Mcp-Session-Id", strings.Repeat("x", own.MaxSessionID+1))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"caddy-mcp-reopen","result":{}}`)
	}}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne, header("Mcp-Session-Id", tok), header("Mcp-Protocol-Version", "2025-11-25")), u))
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Zero(t, u.calls.Load())
}

// The gateway's own initialize asks for its answer plain (an encode
// directive would compress it otherwise), and a compressed one fails.
func TestTheGatewaysOwnInitializeAsksForNoCompression(t *testing.T) {
	for _, compress := range []bool{false, true} {
		h := provision(t, &Handler{FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}})})
		tok := openSession(t, h)
		var asked string
		u := &lostSession{reopen: func(w http.ResponseWriter, r *http.Request) {
			asked = r.Header.Get("Accept-Encoding")
			w.Header().Set("Mcp-Session-Id", "s2")
			w.Header().Set("Content-Type", "application/json")
			ans := []byte(`{"jsonrpc":"2.0","id":"caddy-mcp-reopen","result":{}}`)
			if compress {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				_, _ = zw.Write(ans)
				_ = zw.Close()
				w.Header().Set("Content-Encoding", "gzip")
				ans = b.Bytes()
			}
			_, _ = w.Write(ans)
		}}
		w := httptest.NewRecorder()
		require.NoError(t, h.ServeHTTP(w, post(callOne, header("Mcp-Session-Id", tok), header("Mcp-Protocol-Version", "2025-11-25"), header("Accept-Encoding", "gzip")), u))
		assert.Empty(t, asked)
		if compress {
			assert.Equal(t, http.StatusNotFound, w.Code, "a compressed answer is not read")
		} else {
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, int32(1), u.calls.Load())
		}
	}
}

// An answerer that replays a cached answer with its headers: the session
// id in them is not passed on, nor sealed into a token.
type replaying struct{}

func (replaying) Answer(x *feature.Exchange) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Mcp-Session-Id", "another-clients-session")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	})
}

func TestAnAnswerersSessionIDIsNotPassedOn(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}})})
	h.answerers = append(h.answerers, replaying{})
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, header("Mcp-Protocol-Version", "2025-11-25")), &upstream{}))
	assert.Empty(t, w.Header().Get("Mcp-Session-Id"))
	assert.Contains(t, w.Body.String(), `"tools":[]`)
}

func TestSessionsAndARouterAreRefusedTogether(t *testing.T) {
	ctx, cancel := newCaddyContext()
	defer cancel()
	fs := guests(t, map[string]any{"feature": "test_router"})
	maps.Copy(fs, features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}}))
	h := &Handler{FeaturesRaw: fs}
	err := h.Provision(ctx)
	_ = h.Cleanup()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sessions cannot be combined with a feature that routes")
}

// What a node reopened outlives a reload: the new config's handler sends
// the session to the upstream session it was reopened as, without a
// second reopen.
func TestAReopenedSessionOutlivesAReload(t *testing.T) {
	u := &lostSession{}
	ctx, cancel := newCaddyContext()
	defer cancel()
	old := &Handler{FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}}), logger: zap.NewNop()}
	require.NoError(t, old.Provision(ctx))
	tok := openSession(t, old)
	call := func(h *Handler) {
		w := httptest.NewRecorder()
		require.NoError(t, h.ServeHTTP(w, post(callOne, header("Mcp-Session-Id", tok), header("Mcp-Protocol-Version", "2025-11-25")), u))
		require.Equal(t, http.StatusOK, w.Code)
	}
	call(old)
	reloaded := provision(t, &Handler{FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}})})
	unload(t, old)
	call(reloaded)
	assert.Equal(t, int32(1), u.inits.Load(), "reopened once")
	assert.Equal(t, int32(2), u.calls.Load())
}

// A reopen that failed (the server still starting) is tried again by the
// next request that meets the 404, rather than remembered.
func TestAFailedReopenIsTriedAgain(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "sessions", &Sessions{Secrets: []string{hostileSecret}})})
	tok := openSession(t, h)
	starting := true
	u := &lostSession{}
	u.reopen = func(w http.ResponseWriter, _ *http.Request) {
		if starting {
			starting = false
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Mcp-Session-Id", "s2")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"caddy-mcp-reopen","result":{}}`)
	}
	call := func() int {
		w := httptest.NewRecorder()
		require.NoError(t, h.ServeHTTP(w, post(callOne, header("Mcp-Session-Id", tok), header("Mcp-Protocol-Version", "2025-11-25")), u))
		return w.Code
	}
	assert.Equal(t, http.StatusNotFound, call(), "the first reopen failed")
	assert.Equal(t, http.StatusOK, call(), "the next request reopens")
	assert.Equal(t, int32(2), u.inits.Load())
	assert.Equal(t, int32(1), u.calls.Load())
}
