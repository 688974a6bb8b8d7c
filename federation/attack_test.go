package federation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddymcp/caddy-mcp/session"
)

// streamingServer is a server named name whose GET answers with stream,
// written by write.
func streamingServer(name string, write func(w http.ResponseWriter) error) *server {
	return testServer(name, handlerOf(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return nil
		}
		return write(w)
	}), nil)
}

// merged is the client's merged GET stream of f, for a session that holds
// a session id with every server.
func merged(t *testing.T, f *federation) *httptest.ResponseRecorder {
	t.Helper()
	ids := sessionIDs{}
	for _, s := range f.servers {
		ids[s.name] = "sid-" + s.name
	}
	d := &decision{f: f, o: &opened{ids: ids}, fanOut: true}
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	w := httptest.NewRecorder()
	f.mergeStreams(w, r, d)
	return w
}

// An event of many data lines, each under the bound of a line, is held
// to the bound as a whole: a server cannot make the gateway hold an event
// of any length by never ending it.
func TestAServersEventOfManyLinesOverTheBoundIsDroppedFromTheMergedStream(t *testing.T) {
	line := "data: " + strings.Repeat(" ", 64<<10) + "\n"
	big := streamingServer("big", func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if _, err := io.WriteString(w, `data: {"jsonrpc":"2.0","method":"notifications/message","params":{}`+"\n"); err != nil {
			return err
		}
		for range 2 * maxEvent / (64 << 10) {
			if _, err := io.WriteString(w, line); err != nil {
				return err // the gateway stopped reading: the test's point
			}
		}
		_, err := io.WriteString(w, "data: }\n\n")
		return err
	})
	small := streamingServer("small", func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		_, err := io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
		return err
	})
	w := merged(t, testFederation(big, small))
	require.Equal(t, http.StatusOK, w.Code)
	assert.Less(t, w.Body.Len(), maxEvent, "the long event reached the client")
	assert.Contains(t, w.Body.String(), "notifications/tools/list_changed", "the other server's events still do")
}

// A route that goes on writing to its header after it answered (a
// reverse proxy's trailers) does not race the merged stream's reading of
// the answer's content type.
func TestAServerWritingItsHeaderAfterItAnsweredDoesNotRaceTheMergedStream(t *testing.T) {
	late := streamingServer("late", func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range 100 {
			w.Header().Set(http.TrailerPrefix+"X-Late", fmt.Sprint(i))
		}
		_, err := io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"a\"}}\n\n")
		return err
	})
	w := merged(t, testFederation(late))
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "notifications/resources/updated")
}

// initializing is a server named name that answers initialize with the
// session id sid.
func initializing(name, sid string) *server {
	return testServer(name, answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		w.Header().Set("Mcp-Session-Id", sid)
		return writeRPC(w, req.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`)
	}), nil)
}

// initializedBy is f's answer to a client's initialize, and the session its
// id opens.
func initializedBy(t *testing.T, f *federation) (*httptest.ResponseRecorder, *opened) {
	t.Helper()
	ring, err := session.FromSecrets([]string{"a secret of the test, long enough to be one"})
	require.NoError(t, err)
	f.ring = func() *session.Keyring { return ring }
	f.ttl = session.DefaultTTL
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	msgs, _, err := jsonrpc.Parse(body, nil, 1)
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	w := httptest.NewRecorder()
	f.initializeAll(w, r, &feature.Exchange{Request: r, Messages: msgs, Body: body})
	token := w.Header().Get("Mcp-Session-Id")
	if token == "" {
		return w, nil
	}
	next := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	next.Header.Set("Mcp-Session-Id", token)
	o, err := f.open(&feature.Exchange{Request: next, Start: f.now()})
	require.NoError(t, err)
	return w, o
}

// A server whose session id, within the bound of one, makes the client's
// too long to seal is left out of the session: the others serve, as when
// a server does not answer initialize, and its first call connects it.
func TestAServerWhoseSessionIDMakesTheClientsTooLongIsLeftOutNotEveryServer(t *testing.T) {
	long := initializing("long", strings.Repeat("<", own.MaxSessionID)) // written as \u003c in the token
	good := initializing("good", "good-session")
	w, o := initializedBy(t, testFederation(good, long))
	require.NotNil(t, o, "no session id: %s", w.Body)
	assert.Contains(t, w.Body.String(), `"protocolVersion":"2025-11-25"`)
	assert.Equal(t, sessionIDs{"good": "good-session"}, o.ids)

	var many []*server
	for i := range 10 {
		many = append(many, initializing(fmt.Sprintf("s%d", i), strings.Repeat("x", own.MaxSessionID)))
	}
	w, o = initializedBy(t, testFederation(many...))
	require.NotNil(t, o, "no session id: %s", w.Body)
	assert.NotEmpty(t, o.ids, "the servers whose ids fit are connected")
	assert.Contains(t, o.ids, "s0", "the first servers are kept, the later left out")
}

// The session header spelt with underscores, which a CGI-style server
// reads as the session id, is refused as sessions refuses it: a server's
// own session id sent so would reach it past the token and its principal.
func TestASessionHeaderSpeltWithUnderscoresIsRefused(t *testing.T) {
	f := testFederation(initializing("a", "a-session"))
	_, o := initializedBy(t, f)
	require.NotNil(t, o)
	for _, name := range []string{"Mcp_Session_Id", "mcp_session-id"} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Mcp-Session-Id", o.token)
		r.Header[name] = []string{"a-session"}
		_, err := f.open(&feature.Exchange{Request: r, Start: f.now()})
		assert.ErrorIs(t, err, session.ErrMalformed, name)

		alone := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		alone.Header[name] = []string{"a-session"}
		_, err = f.open(&feature.Exchange{Request: alone, Start: f.now()})
		assert.ErrorIs(t, err, session.ErrMalformed, name)
	}
}

// listing is a server named name whose tools and prompts are one, named
// tool.
func listing(name, tool string) *server {
	return testServer(name, answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		if req.Method == "prompts/list" {
			return writeRPC(w, req.ID, `{"prompts":[{"name":"`+tool+`"}]}`)
		}
		return writeRPC(w, req.ID, `{"tools":[{"name":"`+tool+`"}]}`)
	}), nil)
}

// A session short of a server (not connected in it: its initialize was
// refused by that server, or the server was slow) would list a later
// server's tool under the bare name of the first server's. Its view must
// not route the calls of every other session to the later server's tool:
// the names are those of the last whole lists, whichever session asks.
func TestASessionShortOfAServerDoesNotRouteOtherSessionsCalls(t *testing.T) {
	f := testFederation(listing("a", "admin"), listing("b", "admin"))
	whole := &opened{ids: sessionIDs{"a": "", "b": ""}}
	short := &opened{ids: sessionIDs{"b": ""}}
	x := &feature.Exchange{Request: httptest.NewRequest(http.MethodPost, "/mcp", nil)}
	routedTo := func() string {
		e, _, _ := f.names.Load().tools.lookup(f, "admin")
		require.NotNil(t, e)
		return e.server.name
	}
	f.relist(x, whole)
	require.Equal(t, "a", routedTo())

	f.relist(x, short)
	assert.Equal(t, "a", routedTo(), "a relist under the short session")

	for _, k := range []*kind{toolsList, promptsList} {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"` + k.method + `"}`)
		msgs, _, err := jsonrpc.Parse(body, nil, 1)
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		w := httptest.NewRecorder()
		f.answerList(w, r, &feature.Exchange{Request: r, Messages: msgs, Body: body}, &decision{f: f, o: short, fanOut: true}, k)
		assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"`+k.member+`":[{"name":"b__admin","_meta":{"caddymcp.dev/server":"b"}}]}}`, w.Body.String(),
			"the short session lists b's under the name the others know it by")
	}
	assert.Equal(t, "a", routedTo(), "the short session's tools/list")
	e, _, _ := f.names.Load().prompts.lookup(f, "admin")
	assert.Equal(t, "a", e.server.name, "the short session's prompts/list")

	f.relist(x, whole)
	assert.Equal(t, "b__admin", f.names.Load().tools.all[1].advertised, "a whole list is learned")
}

// A client's response id names the server and the id it gave: one the
// client writes itself reaches a server of the federation only with an id
// an id may be (a string or a number), and never a server not configured.
func TestAResponseIDTheClientWritesIsReadAsNoMoreThanAnID(t *testing.T) {
	a := testServer("a", nil, nil)
	f := testFederation(a)
	for _, id := range []string{`7`, `"x"`, `-1.5`} {
		s, got, ok := f.serverID(clientID(a, json.RawMessage(id)))
		require.True(t, ok, id)
		assert.Equal(t, a, s)
		assert.Equal(t, id, string(got))
	}
	enc := base64.RawURLEncoding.EncodeToString
	for _, id := range []string{
		`"federation/a/` + enc([]byte(`{"x":1}`)) + `"`,
		`"federation/a/` + enc([]byte(`[1]`)) + `"`,
		`"federation/a/` + enc([]byte(`null`)) + `"`,
		`"federation/a/` + enc([]byte(`true`)) + `"`,
		`"federation/a/` + enc([]byte(`{`)) + `"`,
		`"federation/a/!!"`,
		`"federation/a/"`,
		`"federation/a"`,
		`"federation/b/` + enc([]byte(`7`)) + `"`,
		`"federation//` + enc([]byte(`7`)) + `"`,
		`7`,
		`{"federation/a/Nw":1}`,
	} {
		_, _, ok := f.serverID([]byte(id))
		assert.False(t, ok, id)
	}
}

// leaving is a client's side of the merged stream: it leaves (cancels
// the request) once it got a message.
type leaving struct {
	*httptest.ResponseRecorder
	leave context.CancelFunc
}

func (l *leaving) Write(p []byte) (int, error) {
	n, err := l.ResponseRecorder.Write(p)
	if bytes.Contains(p, []byte("data:")) {
		l.leave()
	}
	return n, err
}

// waiting is a server that answers a GET once the request ends, having
// written stream first (nothing: it never sends its header).
func waiting(name, stream string) *server {
	return testServer(name, handlerOf(func(w http.ResponseWriter, r *http.Request) error {
		if stream != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			if _, err := io.WriteString(w, stream); err != nil {
				return err
			}
		}
		<-r.Context().Done()
		return r.Context().Err()
	}), nil)
}

// A client that leaves the merged stream ends every goroutine of it, those
// of a server that never sent its header too: the bubble ends with none
// left.
func TestAClientLeavingTheMergedStreamEndsEveryGoroutineOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := testFederation(waiting("silent", ""), waiting("talking", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n"))
		ctx, leave := context.WithCancel(context.Background())
		defer leave()
		d := &decision{f: f, o: &opened{ids: sessionIDs{"silent": "s1", "talking": "s2"}}, fanOut: true}
		w := &leaving{ResponseRecorder: httptest.NewRecorder(), leave: leave}
		f.mergeStreams(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil), d)
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Contains(t, w.Body.String(), "notifications/message")
	})
	synctest.Test(t, func(t *testing.T) {
		// No server ever sends its header: the client that leaves is let go.
		f := testFederation(waiting("silent", ""))
		ctx, leave := context.WithCancel(context.Background())
		d := &decision{f: f, o: &opened{ids: sessionIDs{"silent": "s1"}}, fanOut: true}
		go func() {
			synctest.Wait() // every goroutine of the stream is blocked
			leave()
		}()
		w := httptest.NewRecorder()
		f.mergeStreams(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil), d)
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	})
}

// The sessions a node remembers are bounded: past the bound the oldest is
// forgotten, and a session kept again takes no second place.
func TestTheRemapKeepsNoMoreThanItsBound(t *testing.T) {
	m := newRemap(3)
	now := time.Unix(1_800_000_000, 0)
	ref := func(i int) [32]byte { return sha256.Sum256([]byte{byte(i)}) }
	for i := range 10 {
		m.keep(ref(i), "a", fmt.Sprint(i), "", now.Add(time.Hour))
		m.keep(ref(i), "a", fmt.Sprint(i), "", now.Add(time.Hour)) // again: no second place
	}
	assert.Equal(t, 3, m.len())
	assert.Len(t, m.order, 3)
	_, ok := m.find(ref(6), "a", now)
	assert.False(t, ok, "the oldest are forgotten")
	e, ok := m.find(ref(9), "a", now)
	require.True(t, ok)
	assert.Equal(t, "9", e.id)
	_, ok = m.find(ref(9), "a", now.Add(2*time.Hour))
	assert.False(t, ok, "an expired session is not found")
}

// A HEAD or an OPTIONS carries no message: it goes to the first server,
// as a single server would get it, not as an empty message to every
// server, answered 202.
func TestAHeadOrOptionsGoesToTheFirstServerAlone(t *testing.T) {
	var asked atomic.Int64
	counting := handlerOf(func(w http.ResponseWriter, _ *http.Request) error {
		asked.Add(1)
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	f := testFederation(testServer("a", counting, nil), testServer("b", counting, nil))
	for _, method := range []string{http.MethodHead, http.MethodOptions} {
		r := httptest.NewRequest(method, "/mcp", nil)
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		x := &feature.Exchange{Request: r, Start: f.now()}
		_, refusal := f.Admit(x)
		require.Nil(t, refusal, method)
		assert.Equal(t, "a", f.Route(x), method)
		if h := f.Answer(x); h != nil {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	assert.Zero(t, asked.Load(), "the federation sent the servers nothing of its own")
}

// A server refuses a request whose id it is still answering in the
// session, as the Go SDK's does: the tools and the prompts, listed at
// once, are each asked under an id of its own.
func TestListsAskedAtOnceOfOneServerHaveIDsOfTheirOwn(t *testing.T) {
	var mu sync.Mutex
	inFlight := map[string]bool{}
	both := make(chan struct{})
	var arrived atomic.Int64
	route := answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		if arrived.Add(1) == 2 {
			close(both)
		}
		mu.Lock()
		dup := inFlight[string(req.ID)]
		inFlight[string(req.ID)] = true
		mu.Unlock()
		if dup {
			w.WriteHeader(http.StatusBadRequest)
			return writeRPC(w, req.ID, `{}`)
		}
		<-both // the other list is asked meanwhile
		if req.Method == "prompts/list" {
			return writeRPC(w, req.ID, `{"prompts":[{"name":"p"}]}`)
		}
		return writeRPC(w, req.ID, `{"tools":[{"name":"t"}]}`)
	})
	f := testFederation(testServer("a", route, nil))
	x := &feature.Exchange{Request: httptest.NewRequest(http.MethodPost, "/mcp", nil)}
	c := f.relist(x, &opened{ids: sessionIDs{"a": "sid"}})
	assert.Contains(t, c.tools.byName, "t")
	assert.Contains(t, c.prompts.byName, "p")
}
