package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/answer"
)

// resumingUpstream breaks the POST's stream after writes, and answers each
// resuming GET with resumed (a status alone when it is not an event
// stream), recording the Last-Event-IDs it was sent.
func resumingUpstream(lastIDs *[]string, writes []string, status int, resumed string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method == http.MethodGet {
			*lastIDs = append(*lastIDs, r.Header.Get("Last-Event-Id"))
			if status != http.StatusOK {
				w.WriteHeader(status)
				return nil
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, resumed)
			return nil
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, p := range writes {
			_, _ = io.WriteString(w, p)
		}
		panic(http.ErrAbortHandler)
	})
}

func TestABrokenResumableStreamIsResumedOnTheUpstream(t *testing.T) {
	h := provision(t, &Handler{})
	var lastIDs []string
	w := httptest.NewRecorder()
	sent := "id: 4\ndata: " + progress + "\n\nretry: 0\nid: 5\ndata: {\"json"
	next := resumingUpstream(&lastIDs, []string{sent}, http.StatusOK, "id: 5\ndata: "+resultOne+"\n\n")
	require.NotPanics(t, func() { require.NoError(t, h.ServeHTTP(w, post(callOne), next)) })
	assert.Equal(t, []string{"4"}, lastIDs, "the id of the last event the client had whole")
	events, lastID := sseClient(w.Body.Bytes())
	assert.Equal(t, "5", lastID)
	assert.Equal(t, []string{progress, resultOne}, messagesOf(events), "the cut event is dropped: %q", w.Body)
}

func TestABrokenStreamTheUpstreamCannotResumeEndsWithTheEnvelope(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusBadGateway} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h := provision(t, &Handler{})
			var lastIDs []string
			w := httptest.NewRecorder()
			next := resumingUpstream(&lastIDs, []string{"id: 4\ndata: " + progress + "\n\n"}, status, "")
			require.NotPanics(t, func() { require.NoError(t, h.ServeHTTP(w, post(callOne), next)) })
			assert.Equal(t, []string{"4"}, lastIDs)
			msgs := messagesOf(first(sseClient(w.Body.Bytes())))
			require.Len(t, msgs, 2, "%q", w.Body)
			env, _ := toolError(t, members(t, []byte(msgs[1]))["result"])
			assert.Equal(t, envelope.SeverityCritical, env.Severity)
			assert.Zero(t, env.RetryAfter)
		})
	}
}

func TestAStreamWithoutAnIDTheClientHadWholeIsNotResumed(t *testing.T) {
	// The id of an event cut off is no event's the client had: nothing
	// can resume after it.
	h := provision(t, &Handler{})
	var lastIDs []string
	w := httptest.NewRecorder()
	next := resumingUpstream(&lastIDs, []string{"data: " + progress + "\n\nid: 5\ndata: {"}, http.StatusOK, "")
	require.NotPanics(t, func() { require.NoError(t, h.ServeHTTP(w, post(callOne), next)) })
	assert.Empty(t, lastIDs)
	assert.Contains(t, w.Body.String(), "HANDOFF_UPSTREAM_UNAVAILABLE")
}

func TestAnIDTooLongToKeepIsNoPlaceToResume(t *testing.T) {
	h := provision(t, &Handler{})
	var lastIDs []string
	w := httptest.NewRecorder()
	long := strings.Repeat("i", answer.MaxResumeID+1)
	next := resumingUpstream(&lastIDs, []string{"id: " + long + "\ndata: " + progress + "\n\n"}, http.StatusOK, "")
	require.NotPanics(t, func() { require.NoError(t, h.ServeHTTP(w, post(callOne), next)) })
	assert.Empty(t, lastIDs)
	assert.Contains(t, w.Body.String(), "HANDOFF_UPSTREAM_UNAVAILABLE")
}

func first[A, B any](a A, _ B) A { return a }
