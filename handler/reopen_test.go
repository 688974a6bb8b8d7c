package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// reopener is a feature that reopens every request's session, as sessions
// do for a pinned session whose token carries the client's initialize.
type reopener struct {
	mu       sync.Mutex
	reopened []string
	params   []byte
}

func (f *reopener) Open(*feature.Exchange) feature.Hook { return f }

func (*reopener) Needs() feature.Needs { return feature.Needs{HeaderOnly: true} }

func (*reopener) Message(*feature.Exchange, []byte) ([]byte, error) { return nil, nil }

func (*reopener) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

func (*reopener) End(*feature.Exchange, feature.Ending) {}

func (f *reopener) Reinitialize(x *feature.Exchange) ([]byte, bool) {
	return f.params, x.Request.Method != http.MethodDelete && x.Request.Header.Get("Mcp-Session-Id") != ""
}

func (f *reopener) Reopened(x *feature.Exchange, _ *http.Request, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reopened = append(f.reopened, id)
	x.Request.Header["Mcp-Session-Id"] = []string{id}
}

// restarted is an upstream that restarted: it knows no session but those
// it opened since, answering 404 to any other, as the SDKs' servers do.
type restarted struct {
	mu       sync.Mutex
	sessions map[string]bool
	// initAnswer, when set, is its status for initialize.
	initStatus int
	seen       []string
	// together, when set, holds each request of the old session until
	// that many have come, so that they all meet the 404 at once.
	together *sync.WaitGroup
}

func (s *restarted) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	if s.together != nil && r.Header.Get("Mcp-Session-Id") == "old" {
		s.together.Done()
		s.together.Wait()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	session := r.Header.Get("Mcp-Session-Id")
	s.seen = append(s.seen, r.Method+" "+msg.Method+" "+session)
	switch {
	case msg.Method == "initialize" && s.initStatus != 0:
		w.WriteHeader(s.initStatus)
	case msg.Method == "initialize":
		id := "new-" + string(rune('a'+len(s.sessions)))
		s.sessions[id] = true
		w.Header().Set("Mcp-Session-Id", id)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+string(msg.ID)+",\"result\":{\"protocolVersion\":\"2025-11-25\",\"params\":"+string(msg.Params)+"}}\n\n")
	case !s.sessions[session]:
		http.Error(w, "session not found", http.StatusNotFound)
	case msg.ID == nil && r.Method == http.MethodPost:
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": standalone\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"session":"`+session+`"}}`)
	}
	return nil
}

func withSession(id string) func(*http.Request) {
	return func(r *http.Request) {
		r.Header.Set("Mcp-Session-Id", id)
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		r.Header.Set("Last-Event-Id", "old-1")
	}
}

func TestALostSessionIsReopenedAndTheRequestSentAgain(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			f := &reopener{params: []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)}
			h := provision(t, &Handler{})
			h.responders = append(h.responders, f)
			up := &restarted{sessions: map[string]bool{}}
			w := httptest.NewRecorder()
			req := post(callOne, withSession("old"))
			if method == http.MethodGet {
				req = newRequest(http.MethodGet, "", withSession("old"))
			}
			w.Header().Set("X-Route", "set before the gateway")
			require.NoError(t, h.ServeHTTP(w, req, caddyhttp.HandlerFunc(up.ServeHTTP)))
			assert.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
			assert.Equal(t, []string{"new-a"}, f.reopened)
			want := []string{
				method + " tools/call old", "POST initialize ", "POST notifications/initialized new-a", method + " tools/call new-a",
			}
			if method == http.MethodGet {
				want[0], want[3] = "GET  old", "GET  new-a"
				assert.Equal(t, ": standalone\n\n", w.Body.String())
			} else {
				assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"session":"new-a"}}`, w.Body.String())
			}
			assert.Equal(t, want, up.seen)
			assert.Equal(t, []string{"set before the gateway"}, w.Header()["X-Route"], "the answer's header is the second answer's, once")
		})
	}
}

func TestASessionThatCannotBeReopenedGetsTheUpstreams404(t *testing.T) {
	f := &reopener{params: []byte(`{}`)}
	h := provision(t, &Handler{})
	h.responders = append(h.responders, f)
	up := &restarted{sessions: map[string]bool{}, initStatus: http.StatusInternalServerError}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne, withSession("old")), caddyhttp.HandlerFunc(up.ServeHTTP)))
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "session not found\n", w.Body.String(), "the upstream's 404, as it wrote it")
	assert.Empty(t, f.reopened)
	assert.Equal(t, []string{"POST tools/call old", "POST initialize "}, up.seen, "the request is not sent again")
}

// A session's GET stream whose session cannot be reopened now (the server
// still starting) is asked to come back, as when its upstream is out of
// reach: a 404 there would end the Go SDK client's whole session, and the
// next GET may reopen it.
func TestASessionsStreamThatCannotBeReopenedIsAskedToComeBack(t *testing.T) {
	f := &reopener{params: []byte(`{}`)}
	h := provision(t, &Handler{})
	h.responders = append(h.responders, f)
	up := &restarted{sessions: map[string]bool{}, initStatus: http.StatusServiceUnavailable}
	w := httptest.NewRecorder()
	req := newRequest(http.MethodGet, "", withSession("old"), header("Accept", "text/event-stream"))
	require.NoError(t, h.ServeHTTP(w, req, caddyhttp.HandlerFunc(up.ServeHTTP)))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
	assert.Equal(t, "retry: 2000\n\n", w.Body.String(), "no 404: the client comes back")
	assert.Empty(t, f.reopened)
	assert.Equal(t, []string{"GET  old", "POST initialize "}, up.seen)
}

func TestADeleteOfALostSessionIsNotReopened(t *testing.T) {
	f := &reopener{params: []byte(`{}`)}
	h := provision(t, &Handler{})
	h.responders = append(h.responders, f)
	up := &restarted{sessions: map[string]bool{}}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, newRequest(http.MethodDelete, "", withSession("old")), caddyhttp.HandlerFunc(up.ServeHTTP)))
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, []string{"DELETE  old"}, up.seen)
}

func TestRequestsThatMeetTheSame404TogetherReopenOneSession(t *testing.T) {
	f := &reopener{params: []byte(`{}`)}
	h := provision(t, &Handler{})
	h.responders = append(h.responders, f)
	var together sync.WaitGroup
	together.Add(2)
	up := &restarted{sessions: map[string]bool{}, together: &together}
	var wg sync.WaitGroup
	for _, req := range []*http.Request{post(callOne, withSession("old")), newRequest(http.MethodGet, "", withSession("old"))} {
		wg.Go(func() {
			w := httptest.NewRecorder()
			assert.NoError(t, h.ServeHTTP(w, req, caddyhttp.HandlerFunc(up.ServeHTTP)))
			assert.Equal(t, http.StatusOK, w.Code)
		})
	}
	wg.Wait()
	assert.Equal(t, []string{"new-a", "new-a"}, f.reopened, "both sent again under the one session reopened")
	inits := 0
	for _, s := range up.seen {
		if s == "POST initialize " {
			inits++
		}
	}
	assert.Equal(t, 1, inits, "%q", up.seen)
}

// A reopen a handler of the route refuses (the server's credential could
// not be obtained) is answered with the refusal: the model reads why,
// rather than that its session is gone.
func TestAReopenTheRouteRefusesIsAnsweredWithTheRefusal(t *testing.T) {
	f := &reopener{params: []byte(`{}`)}
	h := provision(t, &Handler{})
	h.responders = append(h.responders, f)
	up := &restarted{sessions: map[string]bool{}}
	refusing := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get("Mcp-Session-Id") == "" { // the reopen's initialize
			return &feature.Refused{Refusal: feature.Refusal{Envelope: envelope.New(envelope.Forbidden, "Forbidden: no credential for you").Suggest("Ask.").Envelope(), Status: http.StatusForbidden}}
		}
		return up.ServeHTTP(w, r)
	})
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne, withSession("old")), refusing))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `code=\"FORBIDDEN\"`)
	assert.Contains(t, w.Body.String(), `"isError":true`)
	assert.Empty(t, f.reopened)
}

// A request a handler of the route refuses before anything was written is
// answered with the refusal, in the form the request needs.
func TestARequestTheRouteRefusesIsAnsweredWithTheRefusal(t *testing.T) {
	h := provision(t, &Handler{})
	refusing := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return &feature.Refused{Refusal: feature.Refusal{Envelope: envelope.New(envelope.AuthRequired, "Authentication required: sign in").Suggest("Sign in.").Envelope(), Status: http.StatusForbidden}}
	})
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne), refusing))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `code=\"AUTH_REQUIRED\"`)
	w = httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), refusing))
	assert.Equal(t, http.StatusForbidden, w.Code, "a notification's refusal carries its status")
}
