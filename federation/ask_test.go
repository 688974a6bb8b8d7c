package federation

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnEventStreamIsReadEventByEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []string
	}{
		{name: "one event", stream: "data: a\n\n", want: []string{"a"}},
		{name: "two events", stream: "data: a\n\ndata: b\n\n", want: []string{"a", "b"}},
		{name: "CRLF", stream: "data: a\r\n\r\ndata: b\r\n\r\n", want: []string{"a", "b"}},
		{name: "CRLF and LF mixed", stream: "data: a\r\n\ndata: b\n\r\n", want: []string{"a", "b"}},
		{name: "multi-line data", stream: "data: {\"a\":\ndata: 1}\n\n", want: []string{"{\"a\":\n1}"}},
		{name: "multi-line data, CRLF", stream: "data: x\r\ndata: y\r\n\r\n", want: []string{"x\ny"}},
		{name: "comments", stream: ": ping\n\n: more\ndata: x\n: between\ndata: y\n\n", want: []string{"x\ny"}},
		{name: "other fields", stream: "event: message\nid: 7\nretry: 100\ndata: z\n\n", want: []string{"z"}},
		{name: "no space after the colon", stream: "data:a\n\n", want: []string{"a"}},
		{name: "one space taken, not two", stream: "data:  a\n\n", want: []string{" a"}},
		{name: "no trailing blank line", stream: "data: a\n\ndata: b", want: []string{"a", "b"}},
		{name: "no trailing line end", stream: "data: a\ndata: b\n", want: []string{"a\nb"}},
		{name: "blank lines between events", stream: "\n\n\r\ndata: a\n\n\n\ndata: b\n\n", want: []string{"a", "b"}},
		{name: "an event with no data", stream: "event: x\n\ndata: a\n\n", want: []string{"a"}},
		{name: "empty", stream: ""},
		{name: "only comments", stream: ": a\n: b\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for data := range events([]byte(tc.stream)) {
				got = append(got, string(data))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestAnEventStreamIsReadNoFurtherThanAsked(t *testing.T) {
	n := 0
	for range events([]byte("data: a\n\ndata: b\n\ndata: c")) {
		n++
		break
	}
	assert.Equal(t, 1, n)
}

// The response is found in a stream among the server's own requests and
// notifications, and answers to other requests.
func TestTheResponseIsFoundInAStream(t *testing.T) {
	w := &kept{header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}, max: 1 << 20}
	_, _ = w.Write([]byte(": open\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"roots/list\"}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"other\",\"result\":{\"not\":\"this\"}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"mine\",\r\ndata: \"result\":{\"tools\":[]}}"))
	var rep reply
	require.NoError(t, rep.read(w, json.RawMessage(`"mine"`)))
	assert.JSONEq(t, `{"tools":[]}`, string(rep.result))

	rep = reply{}
	assert.ErrorContains(t, rep.read(w, json.RawMessage(`"absent"`)), "held no response")
}
