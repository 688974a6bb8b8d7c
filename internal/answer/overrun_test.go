package answer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
)

// boundedTracker follows the answer to callOne for a hook that fails
// closed on the response past stopAt bytes.
func boundedTracker(t *testing.T, stopAt int) *Stream {
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

// BenchmarkTrackerHoldsAnEventInSmallWrites holds a 1 MiB event for a hook
// that edits, as an upstream writes it 64 bytes at a time: what holding
// costs a byte must not grow with what is held (it did: the held bytes
// were copied onto themselves at every write, 1.5 s of CPU for 2 MB).
func BenchmarkTrackerHoldsAnEventInSmallWrites(b *testing.B) {
	event := []byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"" + strings.Repeat("x", 1<<20-200) + "\"}}\n\n")
	b.SetBytes(int64(len(event)))
	for b.Loop() {
		tr := newStream(parsed(b, callOne), sessionEra)
		tr.edit, tr.hooks, tr.fx, tr.fail = true, &Hooks{edit: true}, &feature.Exchange{}, func(error, json.RawMessage) []byte { return nil }
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
