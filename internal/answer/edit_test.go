package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// editWith puts tr in edit mode, for the answer to the request with id 1,
// with one hook that edits each message with rewrite, and fails closed
// (fail saying what is sent instead) when failClosed.
func editWith(tr *Stream, failClosed bool, rewrite func([]byte) ([]byte, error), fail func(error, json.RawMessage) []byte) {
	hs := &Hooks{id: json.RawMessage("1"), edit: true, failClosed: failClosed}
	hs.list = append(hs.buf[:0], funcHook{rewrite, failClosed})
	tr.edit, tr.hooks, tr.fx, tr.fail = true, hs, &feature.Exchange{}, fail
}

// funcHook is a hook that edits each message with a function, and fails
// closed when failClosed.
type funcHook struct {
	rewrite    func([]byte) ([]byte, error)
	failClosed bool
}

func (f funcHook) Needs() feature.Needs { return feature.Needs{Edit: true, FailClosed: f.failClosed} }

func (f funcHook) Message(_ *feature.Exchange, msg []byte) ([]byte, error) { return f.rewrite(msg) }

func (funcHook) Unreadable(*feature.Exchange, error) envelope.Envelope { return envelope.Envelope{} }

func (funcHook) End(*feature.Exchange, feature.Ending) {}

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
		editWith(tr, false, func(msg []byte) ([]byte, error) {
			if !bytes.Contains(msg, []byte(`"result"`)) {
				return nil, nil
			}
			rewritten = append(rewritten, string(msg))
			return bytes.Replace(msg, []byte(`{"content":[]}`), []byte(`"edited"`), 1), nil
		}, nil)
		var out []byte
		for p := []byte(stream); len(p) > 0; {
			n := min(size, len(p))
			out = append(out, tr.observe(p[:n])...)
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
	editWith(tr, false, func([]byte) ([]byte, error) { return nil, nil }, nil)
	assert.Equal(t, ":\n", string(tr.observe([]byte(":\n"))))
	assert.Empty(t, tr.observe([]byte("data: x\n")), "an event is held until it ends")
	assert.Equal(t, "data: x\n\n", string(tr.observe([]byte("\n"))))
}

// An event too large to hold passes unread, as it comes, or, when the
// read fails closed, is not sent at all: an error takes its place, for the
// id of the response it was. The events after it are read as before,
// however the writes cut the stream, and the tracker holds no more than its
// bounds meanwhile.
func TestTrackerInEditModeAnswersForEventsTooLargeToHold(t *testing.T) {
	pad := strings.Repeat("x", 2*maxEventData)
	list := `{"jsonrpc":"2.0","id":1,"result":{"tools":["admin_reset","search"]}}`
	filtered := `{"jsonrpc":"2.0","id":1,"result":{"tools":["search"]}}`
	after := "id: e3\nevent: message\ndata: " + list + "\n\n"
	afterFiltered := "id: e3\nevent: message\ndata: " + filtered + "\n\n"
	tests := []struct {
		name       string
		failClosed bool
		event      string
		want       string // what the client gets of it; "" when it is not sent
		wantID     string // the id of the error sent in its place
	}{
		{"a result passes unread", false,
			"id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"pad\":\"" + pad + "\"}}\n\n", "as it came", ""},
		{"comments that add up pass unread", false,
			"data: {\"id\":5,\"result\":{}}\n" + strings.Repeat(":"+strings.Repeat("c", 1<<16)+"\n", 40) + "\n", "as it came", ""},
		{"a result, its id first", true,
			"id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pad\":\"" + pad + "\",\"tools\":[\"admin_reset\"]}}\n\n", "", "1"},
		{"a result, its id last, spelt as a client reads the request's", true,
			"id: e2\ndata: {\"result\":{\"tools\":[\"admin_reset\"],\"pad\":\"" + pad + "\"},\"jsonrpc\":\"2.0\",\"id\":\"1\"}\n\n", "", "1"},
		{"a result in data lines under the bound", true,
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"" + pad[:maxEventData/2] + "\",\ndata: \"b\":\"" + pad[:maxEventData/2] + "\",\ndata: \"tools\":[\"admin_reset\"]}}\n\n", "", "1"},
		{"a result that answers no request of the POST", true,
			"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"pad\":\"" + pad + "\"}}\n\n", "", ""},
		{"a result whose id is given twice", true,
			"data: {\"id\":5,\"result\":{\"pad\":\"" + pad + "\"},\"id\":6}\n\n", "", "1"},
		{"a notification", true,
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"" + pad + "\"}}\n\n", "", ""},
		{"an event no client reads", true,
			"event: other\ndata: {\"id\":5,\"result\":{\"tools\":[\"admin_reset\"],\"pad\":\"" + pad + "\"}}\n\n", "", ""},
		{"a result held whole, among comments that add up", true,
			"data: " + list + "\n" + strings.Repeat(":"+strings.Repeat("c", 1<<16)+"\n", 40) + "\n", "event: message\ndata: " + filtered + "\n\n", ""},
		{"a comment between events, which is no message", true,
			":" + pad + "\n", "as it came", ""},
	}
	for _, tt := range tests {
		for _, size := range []int{1031, 32 << 10, len(tt.event) + len(after)} {
			t.Run(fmt.Sprintf("%s/writes of %d bytes", tt.name, size), func(t *testing.T) {
				tr := trackerFor(t, callOne)
				var ids []string
				editWith(tr, tt.failClosed,
					func(msg []byte) ([]byte, error) {
						if !bytes.Contains(msg, []byte("admin_reset")) {
							return nil, nil
						}
						return bytes.Replace(msg, []byte(`"admin_reset",`), nil, 1), nil
					},
					func(err error, id json.RawMessage) []byte {
						assert.ErrorIs(t, err, errEventTooLarge)
						if id == nil {
							id = json.RawMessage("null")
						}
						ids = append(ids, string(id))
						return []byte(`{"error":` + string(id) + `}`)
					})
				var out []byte
				held := 0
				for p := []byte(tt.event + after); len(p) > 0; {
					n := min(size, len(p))
					out = append(out, tr.observe(p[:n])...)
					held = max(held, cap(tr.raw)+cap(tr.sc.Held())+cap(tr.data))
					p = p[n:]
				}
				assert.LessOrEqual(t, held, 6*maxEventData+2*size, "what the tracker held")
				got := string(out)
				require.True(t, strings.HasSuffix(got, afterFiltered), "the event after it is read and edited")
				got = strings.TrimSuffix(got, afterFiltered)
				switch {
				case tt.want == "as it came":
					assert.True(t, got == tt.event, "passed as it came, not %d bytes: %.200q", len(got), got)
				case tt.wantID != "":
					assert.Equal(t, []string{tt.wantID}, ids)
					wantOut := "event: message\ndata: {\"error\":" + tt.wantID + "}\n\n"
					if strings.HasPrefix(tt.event, "id: e2\n") {
						wantOut = "id: e2\n" + wantOut
					}
					assert.Equal(t, wantOut, got, "an error in its place")
				default:
					assert.Empty(t, ids)
					assert.True(t, got == tt.want, "not %d bytes: %.200q", len(got), got)
				}
			})
		}
	}
}

// A withheld event never reaches the client: when the stream breaks in the
// middle of one, the response it may have been is still owed, and the
// stream is repaired. One that passed unread might have given it.
func TestTrackerRepairsAStreamBrokenInAWithheldEvent(t *testing.T) {
	for _, failClosed := range []bool{true, false} {
		tr := trackerFor(t, callOne)
		editWith(tr, failClosed, func([]byte) ([]byte, error) { return nil, nil }, nil)
		tr.observe([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pad\":\"" + strings.Repeat("x", 2*maxEventData)))
		assert.Equal(t, failClosed, tr.Repairable(), "withheld: %v", failClosed)
	}
}

// A CRLF cut by the upstream's writes, its CR ending one and its LF
// beginning the next, is one line ending: its LF goes where its line went,
// sent after it, or dropped with an event sent rewritten or withheld, as
// when the pair comes in one write.
func TestTrackerInEditModeSendsTheLFOfACRLFCutAcrossWrites(t *testing.T) {
	rewritten := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"edited\"}\n\n"
	long := strings.Repeat("x", maxEventData)
	tests := []struct {
		name, first, second string
		failClosed          bool
		want                string
	}{
		{"after a comment", ": keep-alive\r", "\n", false, ": keep-alive\r\n"},
		{"after a comment, before an event rewritten", ": keep-alive\r", "\ndata: " + resultOne + "\n\n", false, ": keep-alive\r\n" + rewritten},
		{"after an event sent as it came", "data: " + progress + "\r\r", "\n", false, "data: " + progress + "\r\r\n"},
		{"after an event sent rewritten", ": c\ndata: " + resultOne + "\r\r", "\n", false, ": c\n" + rewritten},
		{"within an event held", "data: " + progress + "\r", "\n\n", false, "data: " + progress + "\r\n\n"},
		{"within an event passing unread", "data: " + resultOne + "\n\ndata: " + long + "\r", "\n\n", false, rewritten + "data: " + long + "\r\n\n"},
		{"within an event withheld", ": c\ndata: " + long + "\r", "\n\n", true, ": c\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, writes := range [][]string{{tt.first + tt.second}, {tt.first, tt.second}} {
				tr := trackerFor(t, callOne)
				editWith(tr, tt.failClosed, func(msg []byte) ([]byte, error) {
					if !bytes.Contains(msg, []byte(`"result"`)) {
						return nil, nil
					}
					return bytes.Replace(msg, []byte(`{"content":[]}`), []byte(`"edited"`), 1), nil
				}, func(error, json.RawMessage) []byte { return []byte(`{"error":1}`) })
				var out []byte
				for _, w := range writes {
					out = append(out, tr.observe([]byte(w))...)
				}
				assert.True(t, tt.want == string(out), "in %d writes: %.100q", len(writes), out)
			}
		})
	}
}
