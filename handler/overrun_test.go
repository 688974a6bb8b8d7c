package handler

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What the client and the upstream see of a stream stopped past the bound
// of the hook that fails closed: the events before it as they came, then
// at once the hook's words for the call, by the call's id; and the
// upstream is told to stop the call.
func TestAStoppedStreamIsAnsweredAtOnceAndTheUpstreamToldToStop(t *testing.T) {
	h := provision(t, &Handler{})
	h.responders = append(h.responders, budgetOpener{})
	var cancelled atomic.Int32
	endless := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("notifications/cancelled")) {
			cancelled.Add(1)
			assert.Contains(t, string(body), `"requestId":1`)
			w.WriteHeader(http.StatusAccepted)
			return nil
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if _, err := io.WriteString(w, "data: "+progress+"\n\ndata: {\"result\":{\"content\":[{\"type\":\"text\",\"text\":\""); err != nil {
			return err
		}
		for range 1 << 20 { // far more than any bound: the gateway stops it
			if _, err := io.WriteString(w, strings.Repeat("x", 1024)); err != nil {
				return err
			}
		}
		t.Error("the stream was read to its end")
		return nil
	})
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne), endless))
	events := parseEvents(t, w.Body.String())
	require.Len(t, events, 2, "%.300s", w.Body.String())
	assert.Equal(t, progress, events[0])
	assert.Contains(t, events[1], `"id":1,"result":{"content":[{"type":"text","text":"<tool_error code=\"TOO_LARGE\"`)
	assert.Equal(t, int32(1), cancelled.Load(), "the upstream was told to stop the call, once")
}

// parseEvents is the data of the message events of a stream a client reads.
func parseEvents(t *testing.T, stream string) []string {
	t.Helper()
	events, _ := sseClient([]byte(stream))
	return messagesOf(events)
}

// An event whose blank line is a CR that ends the stream is not read by a
// client that waits for the byte after a CR (the TypeScript SDK's): the
// response it carried is owed again, and the stream repaired.
func TestAResponseEndedByTheStreamsLastCRIsOwedAgain(t *testing.T) {
	h := provision(t, &Handler{})
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne), answering(http.StatusOK, map[string]string{"Content-Type": "text/event-stream"}, "data: "+resultOne+"\n\r")))
	events := parseEvents(t, w.Body.String())
	require.NotEmpty(t, events)
	assert.Contains(t, events[len(events)-1], "HANDOFF_UPSTREAM_UNAVAILABLE", "repaired: %q", w.Body.String())

	w = httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne), answering(http.StatusOK, map[string]string{"Content-Type": "text/event-stream"}, "data: "+resultOne+"\n\r", "\n")))
	assert.NotContains(t, w.Body.String(), "HANDOFF_UPSTREAM_UNAVAILABLE", "a byte came after the CR: every client read the event")
}
