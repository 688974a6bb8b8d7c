package handler

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In edit mode the tracker holds each event until its blank line, and sends
// it as it came, or with the owed response rewritten; however the upstream
// cuts its writes, the client gets the same bytes.
func TestTrackerEditsTheOwedResponse(t *testing.T) {
	stream := ": hello\n\n" +
		"id: e1\r\nevent: message\r\ndata: " + progress + "\r\n\r\n" +
		": keep-alive\n" +
		"id: e2\nretry: 100\ndata: {\"jsonrpc\":\"2.0\",\n" +
		"data: \"id\":1,\"result\":{\"content\":[]}}\n\n" +
		"data: after\n\n"
	want := ": hello\n\n" +
		"id: e1\r\nevent: message\r\ndata: " + progress + "\r\n\r\n" +
		": keep-alive\n" +
		"id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":\"edited\"}\n\n" +
		"data: after\n\n"
	for _, size := range []int{1, 2, 3, 7, 64, len(stream)} {
		tr := trackerFor(t, callOne)
		var rewritten []string
		tr.edit = &answerRead{id: json.RawMessage("1"), rewrite: func(msg []byte) ([]byte, error) {
			if !bytes.Contains(msg, []byte(`"result"`)) {
				return nil, nil
			}
			rewritten = append(rewritten, string(msg))
			return bytes.Replace(msg, []byte(`{"content":[]}`), []byte(`"edited"`), 1), nil
		}}
		var out []byte
		for p := []byte(stream); len(p) > 0; {
			n := min(size, len(p))
			got, err := tr.observe(p[:n])
			require.NoError(t, err)
			out = append(out, got...)
			p = p[n:]
		}
		assert.Equal(t, want, string(out), "writes of %d bytes", size)
		assert.Equal(t, []string{"{\"jsonrpc\":\"2.0\",\n\"id\":1,\"result\":{\"content\":[]}}"}, rewritten)
		assert.Zero(t, tr.owed.left)
	}
}

// A comment between events is sent at once, not held for the next event.
func TestTrackerInEditModeDoesNotHoldKeepAlives(t *testing.T) {
	tr := trackerFor(t, callOne)
	tr.edit = &answerRead{id: json.RawMessage("1"), rewrite: func([]byte) ([]byte, error) { return nil, nil }}
	out, err := tr.observe([]byte(":\n"))
	require.NoError(t, err)
	assert.Equal(t, ":\n", string(out))
	out, err = tr.observe([]byte("data: x\n"))
	require.NoError(t, err)
	assert.Empty(t, out, "an event is held until it ends")
	out, err = tr.observe([]byte("\n"))
	require.NoError(t, err)
	assert.Equal(t, "data: x\n\n", string(out))
}

// An event too large to hold stops the editing: it goes as it came, unless
// the answer may not be sent unread.
func TestTrackerInEditModeGivesUpOnHugeEvents(t *testing.T) {
	big := "data: " + strings.Repeat("x", maxEventData+1)
	tr := trackerFor(t, callOne)
	tr.edit = &answerRead{id: json.RawMessage("1"), rewrite: func([]byte) ([]byte, error) { return nil, nil }}
	out, err := tr.observe([]byte(big))
	require.NoError(t, err)
	assert.Equal(t, big, string(out))
	assert.Nil(t, tr.edit)

	tr = trackerFor(t, callOne)
	tr.edit = &answerRead{id: json.RawMessage("1"), failClosed: true, rewrite: func([]byte) ([]byte, error) { return nil, nil }}
	_, err = tr.observe([]byte(big))
	assert.ErrorIs(t, err, errAnswerTooLarge)
}
