package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
)

// sealing are sessions with a secret of their own.
var sealing = &Sessions{Secrets: []string{"0123456789abcdef0123456789abcdef"}}

// A hook that reads only the header (the session's) has the core read
// nothing of the answer: a stream passes unfollowed, as with no hook.
func TestAHeaderOnlyHookHasNoStreamFollowed(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "sessions", sealing)})
	var tracked bool
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, err := io.WriteString(w, "data: "+progress+"\n\n")
		tracked = w.(*answer.Watch).Stream() != nil
		return err
	})
	serve(t, h, newRequest(http.MethodGet, ""), next)
	assert.False(t, tracked, "a GET stream is followed and each event parsed for a hook that reads no message")
}

// lingerResponder is an admitter whose state lingers and would open a hook
// on the answer, recording what the core does with it.
type lingerResponder struct {
	mu     sync.Mutex
	undone bool
	events []string
}

func (l *lingerResponder) Admit(*feature.Exchange) (feature.Undo, *feature.Refusal) { return l, nil }
func (l *lingerResponder) Undo(time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.undone = true
	l.events = append(l.events, "undo")
}
func (l *lingerResponder) Linger() time.Duration               { return time.Second }
func (l *lingerResponder) Open(*feature.Exchange) feature.Hook { return l }
func (l *lingerResponder) Needs() feature.Needs                { return feature.Needs{} }
func (l *lingerResponder) Message(*feature.Exchange, []byte) ([]byte, error) {
	return nil, nil
}
func (l *lingerResponder) Unreadable(*feature.Exchange, error) envelope.Envelope {
	return envelope.Envelope{}
}
func (l *lingerResponder) End(_ *feature.Exchange, e feature.Ending) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "end:"+e.String())
}

// What lingers may be given back before the answer ends (at a deadline):
// it opens no hook, so that no hook is used after its Undo.
func TestWhatLingersOpensNoHook(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "tools", &Tools{Timeouts: []ToolTimeout{{Tools: "*", After: caddy.Duration(20 * time.Millisecond)}}})})
	f := &lingerResponder{}
	h.entries = append(h.entries, f)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if isCancellation(w, r) {
			return nil
		}
		reachUpstream(r)
		<-r.Context().Done()
		return nil
	})
	serve(t, h, post(toolsCall(`1`, "slow")), next)
	assert.Equal(t, []string{"undo"}, f.events)
}

// A deadline that passes between the proxy copying the upstream's header
// and writing it: the TIMEOUT the gateway answers with carries the header
// as the hooks made it, never the upstream's own session id.
func TestATimeoutNeverCarriesTheUpstreamsOwnSessionId(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: features(t, "sessions", sealing, "tools", &Tools{Timeouts: []ToolTimeout{{Tools: "*", After: caddy.Duration(20 * time.Millisecond)}}})})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if isCancellation(w, r) {
			return nil
		}
		reachUpstream(r)
		// reverse_proxy: copy the response's header, then write it.
		w.Header().Set("Mcp-Session-Id", "upstream-own-id")
		w.Header().Set("Content-Type", "application/json")
		<-r.Context().Done() // the deadline passes in between
		w.WriteHeader(http.StatusOK)
		return nil
	})
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(toolsCall(`1`, "slow")), next))
	assert.Contains(t, w.Body.String(), "TIMEOUT")
	ids := w.Header().Values("Mcp-Session-Id")
	require.Len(t, ids, 1)
	assert.NotEqual(t, "upstream-own-id", ids[0], "the upstream's own id reaches the client")
}
