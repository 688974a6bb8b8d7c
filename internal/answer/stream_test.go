package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// parsed is what inspect learns of a body: its messages.
func parsed(t testing.TB, body string) []jsonrpc.Message {
	t.Helper()
	msgs, _, err := jsonrpc.Parse([]byte(body), nil, 1<<20)
	require.NoError(t, err, "%s", body)
	return msgs
}

// trackerState is everything a tracker decides from the bytes it observed.
type trackerState struct {
	Owed                 []string
	Resumable            bool
	Unreadable           bool
	MidEvent             bool
	Partial, Data, Event string
	DataLines            int
	LastCR               bool
}

func stateOf(tr *Stream) trackerState {
	var owed []string
	for m := range tr.owed.all() {
		owed = append(owed, string(m.ID))
	}
	return trackerState{
		Owed: owed, Resumable: tr.resumable, Unreadable: tr.unreadable, MidEvent: tr.midEvent,
		Partial: string(tr.sc.Held()), Data: string(tr.data), Event: string(tr.event),
		DataLines: tr.dataLines, LastCR: tr.sc.State() == sse.AfterCR,
	}
}

// trackerFor is a tracker following the answer to body, which must hold a
// request.
func trackerFor(t testing.TB, body string) *Stream {
	t.Helper()
	tr := newStream(parsed(t, body), sessionEra)
	require.NotNil(t, tr, "a body with a request is followed")
	return tr
}

func TestTrackerFollowsAnEventStreamAsClientsReadIt(t *testing.T) {
	batch := `[` + callOne + `,{"jsonrpc":"2.0","id":"two","method":"tools/list"},` + progress + `]`
	tests := []struct {
		name   string
		body   string
		stream string
		// owed are the ids still owed at the end.
		owed                            []string
		resumable, unreadable, midEvent bool
	}{
		{name: "a message event with the response settles it",
			body: callOne, stream: "event: message\ndata: " + resultOne + "\n\n"},
		{name: "an event without a name is a message",
			body: callOne, stream: "data: " + resultOne + "\n\n"},
		{name: "data without a space after the colon",
			body: callOne, stream: "data:" + resultOne + "\n\n"},
		{name: "an error response settles too",
			body: callOne, stream: `data: {"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}` + "\n\n"},
		{name: "a notification settles nothing",
			body: callOne, stream: "data: " + progress + "\n\n", owed: []string{"1"}},
		{name: "a server request with the same id settles nothing",
			body: callOne, stream: `data: {"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}` + "\n\n", owed: []string{"1"}},
		{name: "a response to another id settles nothing",
			body: callOne, stream: `data: {"jsonrpc":"2.0","id":2,"result":{}}` + "\n\n", owed: []string{"1"}},
		{name: "comments are ignored, even when they look like data",
			body: callOne, stream: ": keep-alive\n:data: " + resultOne + "\n\n", owed: []string{"1"}},
		{name: "an event of another name is not a message",
			body: callOne, stream: "event: ping\ndata: " + resultOne + "\n\n", owed: []string{"1"}},
		{name: "event names are case-sensitive",
			body: callOne, stream: "event: Message\ndata: " + resultOne + "\n\n", owed: []string{"1"}},
		{name: "an event name lasts for its event only",
			body: callOne, stream: "event: ping\ndata: x\n\ndata: " + resultOne + "\n\n"},
		{name: "data split over lines is joined with line feeds",
			body: callOne, stream: "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\ndata: \"result\":{}}\n\n"},
		{name: "an event not ended by a blank line is not dispatched",
			body: callOne, stream: "data: " + resultOne + "\n", owed: []string{"1"}, midEvent: true},
		{name: "a blank line without data dispatches nothing",
			body: callOne, stream: "event: message\n\n\n", owed: []string{"1"}},
		{name: "data that is not JSON is ignored",
			body: callOne, stream: "data: {\"id\":1,\n\n", owed: []string{"1"}},
		{name: "a field without a colon has an empty value",
			body: callOne, stream: "data\n\n", owed: []string{"1"}},
		{name: "unknown fields are ignored",
			body: callOne, stream: "retry: 1000\nfoo: bar\ndata: " + resultOne + "\n\n"},
		{name: "CRLF line endings",
			body: callOne, stream: "event: message\r\ndata: " + resultOne + "\r\n\r\n"},
		{name: "CR line endings",
			body: callOne, stream: "event: message\rdata: " + resultOne + "\r\r"},
		{name: "an id line makes the stream resumable",
			body: callOne, stream: "id: 7\ndata: " + progress + "\n\n", owed: []string{"1"}, resumable: true},
		{name: "an id without a space",
			body: callOne, stream: "id:ev-1\n", owed: []string{"1"}, resumable: true, midEvent: true},
		{name: "an empty id does not",
			body: callOne, stream: "id:\nid\ndata: " + progress + "\n\n", owed: []string{"1"}},
		{name: "an id holding NUL is ignored, as clients ignore it",
			body: callOne, stream: "id: 7\x00\ndata: " + progress + "\n\n", owed: []string{"1"}},
		{name: "responses in a batch settle each request",
			body: batch, stream: `data: [{"jsonrpc":"2.0","id":"two","result":{}},` + resultOne + "]\n\n"},
		{name: "responses in separate events, in any order",
			body: batch, stream: `data: {"jsonrpc":"2.0","id":"two","result":{}}` + "\n\n" + "data: " + progress + "\n\n", owed: []string{"1"}},
		{name: "an id spelled with escapes settles the request",
			body:   `{"jsonrpc":"2.0","id":"café","method":"tools/call","params":{"name":"x"}}`,
			stream: `data: {"jsonrpc":"2.0","id":"caf\u00e9","result":{}}` + "\n\n"},
		{name: "a number id written another way settles the request",
			body:   `{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"x"}}`,
			stream: `data: {"jsonrpc":"2.0","id":100.0,"result":{}}` + "\n\n"},
		{name: "a string id a client reads as the number settles it",
			body: callOne, stream: `data: {"jsonrpc":"2.0","id":"1","result":{}}` + "\n\n"},
		{name: "a string id no client reads as the number does not settle it",
			body: callOne, stream: `data: {"jsonrpc":"2.0","id":"one","result":{}}` + "\n\n", owed: []string{"1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trackerFor(t, tt.body)
			tr.observe([]byte(tt.stream))
			got := stateOf(tr)
			assert.Equal(t, tt.owed, got.Owed, "still owed")
			assert.Equal(t, tt.resumable, got.Resumable, "resumable")
			assert.Equal(t, tt.unreadable, got.Unreadable, "unreadable")
			assert.Equal(t, tt.midEvent, got.MidEvent, "mid-event")
			assert.Equal(t, len(tt.owed) > 0 && !tt.resumable && !tt.unreadable, tr.Repairable(), "repairable")
		})
	}
}

func TestTrackerIsOnlyForAnswersThatOweResponses(t *testing.T) {
	for _, body := range []string{
		progress,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`[` + progress + `,{"jsonrpc":"2.0","id":"r","result":{}}]`,
		`[]`,
	} {
		assert.Nil(t, newStream(parsed(t, body), sessionEra), "%s owes no response", body)
	}
}

func TestTrackerMarksEventsBeyondMaxEventDataUnreadable(t *testing.T) {
	big := strings.Repeat("x", maxEventData)
	tests := []struct {
		name   string
		writes []string
		// unreadable: the tracker gave up on an event.
		unreadable bool
	}{
		{"one data line over the bound", []string{"data: " + big + "\n\n"}, true},
		{"data lines adding up over the bound", []string{"data: " + big[:maxEventData/2] + "\ndata: " + big[:maxEventData/2] + "\n\n"}, true},
		{"an unterminated line over the bound, across writes", []string{"data: " + big[:maxEventData/2], big[:maxEventData/2] + "x"}, true},
		{"data lines just within the bound", []string{"data: " + big[:maxEventData/2-1] + "\ndata: " + big[:maxEventData/2-1] + "\n\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trackerFor(t, callOne)
			for _, w := range tt.writes {
				tr.observe([]byte(w))
			}
			assert.Equal(t, tt.unreadable, tr.unreadable)
			assert.Equal(t, !tt.unreadable, tr.Repairable(), "an unreadable event might have been the response: no repair")
		})
	}
}

func TestTrackerKeepsAtMostMaxEventDataOfALine(t *testing.T) {
	tr := trackerFor(t, callOne)
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	tr.observe([]byte("data: "))
	for range 2 * maxEventData / len(chunk) {
		tr.observe(chunk)
	}
	assert.True(t, tr.unreadable)
	assert.LessOrEqual(t, cap(tr.sc.Held()), 2*maxEventData, "memory follows the bound, not the line")
}

func TestRepairEndsTheStreamWithOneMessagePerOwedRequest(t *testing.T) {
	batch := `[` + callOne + `,{"jsonrpc":"2.0","id":"two","method":"tools/list"},` + progress +
		`,{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fetch"}}]`
	env := testFailures.Broken("the connection to the MCP server broke")
	tests := []struct {
		name     string
		upstream string
		// delivered are the message events the client got from the
		// upstream; owed the ids the repair answers, in order.
		delivered []string
		owed      []string
	}{
		{name: "nothing was sent", upstream: "", owed: []string{"1", `"two"`, "3"}},
		{name: "after a complete event",
			upstream: "data: " + progress + "\n\n", delivered: []string{progress}, owed: []string{"1", `"two"`, "3"}},
		{name: "after one response",
			upstream: `data: {"jsonrpc":"2.0","id":"two","result":{}}` + "\n\n", delivered: []string{`{"jsonrpc":"2.0","id":"two","result":{}}`}, owed: []string{"1", "3"}},
		{name: "an event cut off after its data line is discarded",
			upstream: "data: " + resultOne + "\n", owed: []string{"1", `"two"`, "3"}},
		{name: "an event cut off mid-line is discarded",
			upstream: "data: " + resultOne[:20], owed: []string{"1", `"two"`, "3"}},
		{name: "an event cut off after a CR is discarded",
			upstream: "data: " + resultOne + "\r", owed: []string{"1", `"two"`, "3"}},
		{name: "an unfinished id line cannot become the last event id",
			upstream: "data: " + progress + "\n\nid: 99", delivered: []string{progress}, owed: []string{"1", `"two"`, "3"}},
		{name: "an unfinished comment",
			upstream: ": keep", owed: []string{"1", `"two"`, "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trackerFor(t, batch)
			tr.observe([]byte(tt.upstream))
			require.True(t, tr.Repairable())

			repair := tr.AppendRepair(nil, &env)
			assert.False(t, tr.Repairable(), "nothing is owed after the repair")
			assert.Zero(t, tr.owed.left)

			events, lastID := sseClient(append([]byte(tt.upstream), repair...))
			assert.Empty(t, lastID, "the stream has no last event id")
			got := messagesOf(events)
			require.Len(t, got, len(tt.delivered)+len(tt.owed), "%q", got)
			assert.Equal(t, append([]string{}, tt.delivered...), append([]string{}, got[:len(tt.delivered)]...), "what the upstream finished reaches the client untouched")
			for i, id := range tt.owed {
				m := members(t, []byte(got[len(tt.delivered)+i]))
				assert.Equal(t, id, string(m["id"]), "owed requests are answered in the order they were sent")
				if id == `"two"` {
					e := decodeRPCError(t, m["error"])
					assert.Equal(t, envelope.CodeServerError, e.Code, "a request other than tools/call gets a JSON-RPC error")
					assert.Equal(t, string(envelope.HandoffUpstreamUnavailable), e.Data.Code)
					continue
				}
				parsedEnv, isError := toolError(t, m["result"])
				assert.True(t, isError)
				assert.Equal(t, envelope.HandoffUpstreamUnavailable, parsedEnv.Code)
				assert.Equal(t, "The MCP server did not finish answering: the connection to the MCP server broke before the response to this request", parsedEnv.Message)
				assert.Zero(t, parsedEnv.RetryAfter, "the call reached the server: no retry_after")
				assert.Equal(t, envelope.SeverityCritical, parsedEnv.Severity, "the call may have run")
			}
		})
	}
}

func TestAppendDiscardNamesTheUnfinishedEventSoClientsDropIt(t *testing.T) {
	long := strings.Repeat("9", maxEventData)
	tests := []struct {
		name, observed, want string
	}{
		{"nothing unfinished on the line", "", "event: " + discardedEvent + "\n\n"},
		{"an unfinished data line is ended", "data: {", "\nevent: " + discardedEvent + "\n\n"},
		{"an unfinished id line gets a NUL", "id: 12", "\x00\nevent: " + discardedEvent + "\n\n"},
		{"any line starting with id gets one", "idle", "\x00\nevent: " + discardedEvent + "\n\n"},
		{"an unfinished first id line after a byte order mark gets one", "\xef\xbb\xbfid: 12", "\x00\nevent: " + discardedEvent + "\n\n"},
		{"an unfinished line too long to keep is ended", "data: {" + long, "\nevent: " + discardedEvent + "\n\n"},
		{"an unfinished id line too long to keep gets a NUL", "id: " + long, "\x00\nevent: " + discardedEvent + "\n\n"},
		{"an unfinished comment too long to keep is ended", ":" + long, "\nevent: " + discardedEvent + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trackerFor(t, callOne)
			tr.observe([]byte(tt.observed))
			assert.Equal(t, tt.want, string(tr.appendDiscard(nil)))
			if tt.observed != "" {
				env := testFailures.Broken("x")
				assert.True(t, strings.HasPrefix(string(tr.AppendRepair(nil, &env)), tt.want), "a repair ends the unfinished line first")
			}
		})
	}
}

// splitCorpus are event streams written with LF line endings; the split
// tests write each with LF, CR and CRLF.
var splitCorpus = []string{
	"",
	"\n",
	"data: " + resultOne + "\n\n",
	"event: message\ndata: " + resultOne + "\n\n",
	": keep-alive\n\n: another\ndata: " + progress + "\n\ndata: " + resultOne + "\n\n",
	"data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\ndata: \"result\":{}}\n\n",
	"event: ping\ndata: " + resultOne + "\n\nevent: message\ndata: " + `{"jsonrpc":"2.0","id":"two","result":{}}` + "\n\n",
	"id: 7\ndata: " + progress + "\n\n",
	"id: 7\x00\ndata: " + progress + "\n\n",
	"id:\n\ndata: " + resultOne + "\n",
	"data: [" + resultOne + `,{"jsonrpc":"2.0","id":"two","result":{}}]` + "\n\n",
	"data: " + `{"jsonrpc":"2.0","id":1.0e0,"result":{}}` + "\n\ndata: x",
	"data: " + progress + "\n\nid: 9",
	"data\n\ndata:\n\n\n\n",
	"retry: 10\nfoo\n:\n\n",
}

// lineEndings write a stream's line feeds as each ending clients accept.
var lineEndings = map[string]string{"LF": "\n", "CR": "\r", "CRLF": "\r\n"}

const splitBatch = `[` + callOne + `,{"jsonrpc":"2.0","id":"two","method":"tools/list"},` + progress + `]`

// observeIn feeds stream to a fresh tracker in writes cut at cuts, and
// returns its final state.
func observeIn(t testing.TB, msgs []jsonrpc.Message, stream []byte, cuts ...int) trackerState {
	t.Helper()
	tr := newStream(msgs, sessionEra)
	require.NotNil(t, tr)
	prev := 0
	for _, c := range cuts {
		tr.observe(stream[prev:c])
		prev = c
	}
	tr.observe(stream[prev:])
	return stateOf(tr)
}

// checkSplits holds the tracker to one reading of a stream, however the
// upstream's writes cut it: in two writes at every byte, and, for streams
// of at most maxThree bytes, in three at every pair of bytes.
func checkSplits(t testing.TB, msgs []jsonrpc.Message, stream []byte, maxThree int) {
	t.Helper()
	want := observeIn(t, msgs, stream)
	for i := 1; i < len(stream); i++ {
		if got := observeIn(t, msgs, stream, i); !reflect.DeepEqual(want, got) {
			assert.Equal(t, want, got, "%q cut at %d", stream, i)
			return
		}
	}
	if len(stream) > maxThree {
		return
	}
	for i := 1; i < len(stream); i++ {
		for j := i + 1; j < len(stream); j++ {
			if got := observeIn(t, msgs, stream, i, j); !reflect.DeepEqual(want, got) {
				assert.Equal(t, want, got, "%q cut at %d and %d", stream, i, j)
				return
			}
		}
	}
}

func TestTrackerReadsAStreamTheSameHoweverItIsCut(t *testing.T) {
	msgs := parsed(t, splitBatch)
	for i, stream := range splitCorpus {
		for name, ending := range lineEndings {
			t.Run(fmt.Sprintf("%d/%s", i, name), func(t *testing.T) {
				checkSplits(t, msgs, []byte(strings.ReplaceAll(stream, "\n", ending)), 1<<10)
			})
		}
	}
}

func TestTrackerReadsLinesAsClientsDo(t *testing.T) {
	// Whatever the cuts, the tracker settles exactly the responses a client
	// receives in message events.
	msgs := parsed(t, splitBatch)
	for i, stream := range splitCorpus {
		for name, ending := range lineEndings {
			t.Run(fmt.Sprintf("%d/%s", i, name), func(t *testing.T) {
				s := []byte(strings.ReplaceAll(stream, "\n", ending))
				_, lastID := sseClient(s)
				_, received := clientReads(s)
				want := stillOwed(msgs, received)
				got := observeIn(t, msgs, s)
				assert.Equal(t, want, got.Owed)
				assert.Equal(t, lastID != "", got.Resumable, "resumable exactly when the client has a last event id")
			})
		}
	}
}

// FuzzSSETrackerSplits holds the tracker to one reading of any stream,
// however the upstream's writes cut it. ending rewrites the stream's line
// feeds as CR (1) or CRLF (2), or leaves it as it is.
func FuzzSSETrackerSplits(f *testing.F) {
	for _, s := range splitCorpus {
		for e := range uint8(3) {
			f.Add([]byte(s), e)
		}
	}
	msgs := parsed(f, splitBatch)
	f.Fuzz(func(t *testing.T, stream []byte, ending uint8) {
		if len(stream) > 2<<10 {
			return
		}
		switch ending % 3 {
		case 1:
			stream = bytes.ReplaceAll(stream, []byte("\n"), []byte("\r"))
		case 2:
			stream = bytes.ReplaceAll(stream, []byte("\n"), []byte("\r\n"))
		}
		checkSplits(t, msgs, stream, 64)
	})
}

func TestAnEmptyWriteChangesNothing(t *testing.T) {
	// io.Writer allows a write of no bytes; reverse_proxy does not make
	// them, but nothing stops another handler in between.
	msgs := parsed(t, callOne)
	stream := []byte(`data: {"jsonrpc":"2.0",` + "\r\n" + `data: "id":1,"result":{}}` + "\r\n\r\n")
	want := observeIn(t, msgs, stream)
	require.Empty(t, want.Owed)
	for i := 0; i <= len(stream); i++ {
		got := observeIn(t, msgs, stream, i, i)
		if !assert.Equal(t, want, got, "an empty write at %d", i) {
			return
		}
	}
}

func TestTrackerMarksLongLinesUnreadableHoweverTheyAreCut(t *testing.T) {
	// A line longer than maxEventData is not read: it is unreadable whether
	// it arrives in one write or in several.
	for _, line := range []string{
		": " + strings.Repeat("c", maxEventData),
		"event: " + strings.Repeat("e", maxEventData),
		"data: " + strings.Repeat("d", maxEventData-3),
	} {
		t.Run(line[:5], func(t *testing.T) {
			stream := []byte(line + "\n")
			msgs := parsed(t, callOne)
			whole := observeIn(t, msgs, stream)
			cut := observeIn(t, msgs, stream, len(stream)/2)
			assert.Equal(t, whole.Unreadable, cut.Unreadable, "one write: unreadable %v; two: %v", whole.Unreadable, cut.Unreadable)
		})
	}
}

func TestRepairedBatchAnswersKeepTheirIDsByteForByte(t *testing.T) {
	ids := []string{`"a\"b"`, `12345678901234567890123`, `-0`, `"caf\u00e9"`}
	var parts []string
	for _, id := range ids {
		parts = append(parts, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"t"}}`)
	}
	tr := trackerFor(t, "["+strings.Join(parts, ",")+"]")
	env := testFailures.Broken("x")
	events, _ := sseClient(tr.AppendRepair(nil, &env))
	got := messagesOf(events)
	require.Len(t, got, len(ids))
	for i, data := range got {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(data), &m))
		assert.Equal(t, ids[i], string(m["id"]))
	}
}
