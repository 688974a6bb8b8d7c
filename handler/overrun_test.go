package handler

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
)

// boundedTracker follows the answer to callOne for a hook that fails
// closed on the response past stopAt bytes.
func boundedTracker(t *testing.T, stopAt int) *sseTracker {
	tr := trackerFor(t, callOne)
	editWith(tr, true, func([]byte) ([]byte, error) { return nil, nil }, func(error, json.RawMessage) []byte { return []byte(`{"error":1}`) })
	tr.hooks.stopAt = stopAt
	return tr
}

// An event that may be the response owed is read no further than the
// bound: once past it, the stream stops, whether the event's lines ended
// or one never does, and whatever follows is not read; whatever its type,
// since a client reads some types as a message that others do not.
func TestAnEventThatMayBeTheResponseStopsTheStreamPastTheBound(t *testing.T) {
	pad := strings.Repeat("x", 200)
	for name, event := range map[string]string{
		"its id first":                 `data: {"jsonrpc":"2.0","id":1,"result":{"pad":"` + pad,
		"its id last":                  `data: {"result":{"pad":"` + pad,
		"its id spelt as a string":     `data: {"jsonrpc":"2.0","id":"1","result":{"pad":"` + pad,
		"in lines":                     "data: {\"result\":\ndata: {\"pad\":\"" + pad,
		"of no type, a line at a time": "data: {\"result\":{\"pad\":\"" + pad[:50] + "\"}\ndata: ,\"more\":\"" + pad,
		// The Go SDK's client reads "message " as "message".
		"of a type spelled otherwise": "event: message \ndata: {\"result\":{\"pad\":\"" + pad,
	} {
		t.Run(name, func(t *testing.T) {
			tr := boundedTracker(t, 100)
			for i := range len(event) {
				tr.observe([]byte(event[i : i+1]))
				if tr.stop != nil {
					assert.Greater(t, i, 100, "not before the bound")
					break
				}
			}
			require.ErrorIs(t, tr.stop, feature.ErrTooLarge, "stopped past the bound")
		})
	}
}

// An event found not to be the response owed is read on: a server's
// notification or request, a response to another request.
func TestAnEventThatIsNotTheResponseIsReadOnPastTheBound(t *testing.T) {
	pad := strings.Repeat("x", 300)
	for name, event := range map[string]string{
		"a notification":           `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + pad + `"}}`,
		"a server's request":       `data: {"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"x":"` + pad + `"}}`,
		"a response to another id": `data: {"jsonrpc":"2.0","id":7,"result":{"pad":"` + pad + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			tr := boundedTracker(t, 100)
			tr.observe([]byte(event + "\n\n"))
			assert.NoError(t, tr.stop)
			assert.Equal(t, []string{"1"}, stateOf(tr).Owed, "the response is still owed")
		})
	}
}

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

// BenchmarkTrackerHoldsAnEventInSmallWrites holds a 1 MiB event for a hook
// that edits, as an upstream writes it 64 bytes at a time: what holding
// costs a byte must not grow with what is held (it did: the held bytes
// were copied onto themselves at every write, 1.5 s of CPU for 2 MB).
func BenchmarkTrackerHoldsAnEventInSmallWrites(b *testing.B) {
	event := []byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"" + strings.Repeat("x", 1<<20-200) + "\"}}\n\n")
	b.SetBytes(int64(len(event)))
	for b.Loop() {
		tr := newSSETracker(parsed(b, callOne), sessionEra)
		tr.edit, tr.hooks, tr.fx, tr.fail = true, &answerHooks{edit: true}, &feature.Exchange{}, func(error, json.RawMessage) []byte { return nil }
		for p := event; len(p) > 0; p = p[min(64, len(p)):] {
			tr.observe(p[:min(64, len(p))])
		}
	}
}

// A line ended by a CR alone, which the Go SDK's client does not take for
// a line's end, stops a stream a hook fails closed on: the clients would
// read two streams. Where no hook fails closed, it is followed as the SSE
// specification reads it.
func TestALoneCRStopsAStreamAHookFailsClosedOn(t *testing.T) {
	for _, writes := range [][]string{
		{"data: {\"jsonrpc\":\"2.0\",\r\"id\":1,\"result\":{}}\n\n"},
		{"data: {\"jsonrpc\":\"2.0\",\r", "\"id\":1,\"result\":{}}\n\n"},
	} {
		for _, failClosed := range []bool{true, false} {
			tr := trackerFor(t, callOne)
			editWith(tr, failClosed, func([]byte) ([]byte, error) { return nil, nil }, func(error, json.RawMessage) []byte { return nil })
			for _, w := range writes {
				tr.observe([]byte(w))
			}
			if failClosed {
				assert.ErrorIs(t, tr.stop, errLinesTwoWays, "%q", writes)
			} else {
				assert.NoError(t, tr.stop, "%q", writes)
			}
		}
	}
	tr := trackerFor(t, callOne)
	editWith(tr, true, func([]byte) ([]byte, error) { return nil, nil }, nil)
	tr.observe([]byte("data: " + resultOne + "\r"))
	tr.observe([]byte("\n\r\n"))
	assert.NoError(t, tr.stop, "CRLF cut across writes is no lone CR")
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
