package answer

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// The core reads an upstream's answer as a sequence of JSON-RPC messages
// for the features' hooks, however the upstream's writes cut it. These
// fuzz tests hold it to that: the same messages reach the hooks, in the
// same order, and the client gets the same bytes, whether the answer comes
// in one write, in two cut at any byte, or a byte at a time.

// readerRequest is the batch the streams answer: requests with ids 1, "two"
// and 3, and a notification.
const readerRequest = `[` + callOne + `,{"jsonrpc":"2.0","id":"two","method":"tools/list"},` +
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fetch"}},` + progress + `]`

// tapeMessages are the data a stream's events carry: responses to the
// requests, to none of them, an error, a notification, a batch, a server's
// request, and data that is no JSON-RPC. None holds a comma inside a
// string, so that the data can be cut into lines at its commas and stay
// JSON.
var tapeMessages = []string{
	resultOne,
	`{"jsonrpc":"2.0","id":"two","result":{"tools":[{"name":"search"}]}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad arguments"}}`,
	progress,
	`[` + resultOne + `,` + progress + `]`,
	`[{"jsonrpc":"2.0","id":3,"result":{"content":[]}},{"jsonrpc":"2.0","id":"two","result":{}}]`,
	`{"jsonrpc":"2.0","id":9,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`,
	`{ "jsonrpc": "2.0", "id": 1.0, "result": "text: with a colon" }`,
	``,
	`x`,
	` {"id":1}`,
}

// Line endings, as a tape names them.
const (
	lf = iota
	cr
	crlf
)

// byteOrderMark may open a stream; clients drop it.
var byteOrderMark = []byte("\xef\xbb\xbf")

var tapeEndings = [...]string{lf: "\n", cr: "\r", crlf: "\r\n"}

// eventStreamFrom turns a fuzz input into an event stream of at most about
// max bytes, a piece after another: message events (see messageEvent),
// comments, stray blank lines, field lines out of any event, events of
// another type, a byte order mark. Each piece reads its decisions, then one
// byte for the endings of its lines (LF, CR or CRLF, see lineEnds), so
// that a CR may end a line and the blank line after it end with LF.
func eventStreamFrom(input []byte, max int) []byte {
	t := tape(input)
	var s []byte
	for len(t) > 0 && len(s) < max {
		var lines []string
		switch t.Next(8) {
		case 0, 1, 2:
			lines = messageEvent(&t)
		case 3:
			lines = []string{[]string{": keep-alive", ":", ":data: " + resultOne, ": " + progress}[t.Next(4)]}
		case 4:
			lines = []string{""}
		case 5:
			lines = []string{[]string{"event: ping", "event: message", "retry: 100", "foo", "id: 5", "data"}[t.Next(6)]}
		case 6:
			lines = []string{"event: ping", "data: " + resultOne, ""}
		case 7:
			s = append(s, byteOrderMark...)
			continue
		}
		ends := t.Next(256)
		for _, l := range lines {
			s = append(s, l...)
			s = append(s, tapeEndings[ends%3]...)
			ends = ends/3 + ends%3*81 // the next of five, in turn
		}
	}
	return s
}

// messageEvent reads a message event's decisions, and returns its lines:
// an id line or none, a type line or none, the data of one of tapeMessages
// in one line, cut into lines at its commas (still JSON), or cut at any
// byte (no longer JSON), "data:" with a space or not, a comment after the
// first data line or none, and a blank line ending it, or none.
func messageEvent(t *tape) []string {
	id, typ, msg, shape, at := t.Next(6), t.Next(6), tapeMessages[t.Next(len(tapeMessages))], t.Next(4), t.Next(256)
	noSpace, comment, open := t.Next(3) == 0, t.Next(5) == 0, t.Next(10) == 0
	var lines []string
	switch id {
	case 1:
		lines = append(lines, "id: 7")
	case 2:
		lines = append(lines, "id:")
	case 3:
		lines = append(lines, "id: e\x00")
	case 4:
		lines = append(lines, "id:e-"+strconv.Itoa(at))
	}
	switch typ {
	case 1:
		lines = append(lines, "event: message")
	case 2:
		lines = append(lines, "event:message")
	case 3:
		lines = append(lines, "event: Message")
	}
	parts := []string{msg}
	switch shape {
	case 2:
		parts = strings.SplitAfter(msg, ",")
	case 3:
		at %= len(msg) + 1
		parts = []string{msg[:at], msg[at:]}
	}
	prefix := "data: "
	if noSpace {
		prefix = "data:"
	}
	for i, p := range parts {
		lines = append(lines, prefix+p)
		if i == 0 && comment {
			lines = append(lines, ": among the lines")
		}
	}
	if !open {
		lines = append(lines, "")
	}
	return lines
}

// tapeEvent is a message event as messageEvent reads it from a tape, for
// the seed corpus.
type tapeEvent struct {
	id, typ, msg, shape, at int
	noSpace, comment, open  bool
	ends                    []int
}

func (e tapeEvent) tape() []byte {
	return []byte{0, byte(e.id), byte(e.typ), byte(e.msg), byte(e.shape), byte(e.at),
		chance(e.noSpace, 3), chance(e.comment, 5), chance(e.open, 10), lineEnds(e.ends...)}
}

// chance is the byte a tape holds for a decision made with probability one
// in n.
func chance(set bool, n byte) byte {
	if set {
		return 0
	}
	return n - 1
}

// lineEnds is the byte a tape holds for the endings of a piece's lines,
// in turn: the first five, the others as those.
func lineEnds(ends ...int) byte {
	b := 0
	for i, e := range ends[:min(len(ends), 5)] {
		b += e * []int{1, 3, 9, 27, 81}[i]
	}
	return byte(b)
}

// tapeSeeds are fuzz inputs for the seed corpus: each message in each line
// ending, in one data line, cut at its commas and cut anywhere (each in
// one of the endings), and streams that mix every kind of piece and ending.
func tapeSeeds() [][]byte {
	var seeds [][]byte
	for ending := range len(tapeEndings) {
		e := ending
		for msg := range tapeMessages {
			shape := []int{0, 2, 3}[(msg+ending)%3]
			seeds = append(seeds, tapeEvent{msg: msg, shape: shape, at: 7 * msg, ends: []int{e, e, e, e, e}}.tape())
		}
		seeds = append(seeds, slices.Concat(
			// A keep-alive, a stray blank line, an event of another type,
			// field lines out of any event, then the response, with an id,
			// a type, and a comment among its lines.
			[]byte{3, 0, lineEnds(e), 4, lineEnds(e), 6, lineEnds(e, e, e), 5, 2, lineEnds(e), 5, 3, lineEnds(e)},
			tapeEvent{id: 1, typ: 1, shape: 2, comment: true, ends: []int{e, e, e, e, e}}.tape(),
		))
	}
	seeds = append(seeds,
		// A byte order mark first; data lines without a space; ids of each
		// kind; an event left open.
		slices.Concat([]byte{7},
			tapeEvent{id: 1, noSpace: true, msg: 3, ends: []int{lf, lf, lf}}.tape(),
			tapeEvent{id: 2, typ: 2, msg: 1, ends: []int{cr, cr, cr, cr}}.tape(),
			tapeEvent{id: 3, typ: 3, msg: 2, ends: []int{crlf, crlf, crlf, crlf}}.tape(),
			tapeEvent{id: 4, at: 42, msg: 0, open: true, ends: []int{lf, cr, crlf}}.tape(),
		),
		// A CR ending a data line, and the LF of the blank line after it:
		// one CRLF, and the event goes on.
		slices.Concat(
			tapeEvent{msg: 3, ends: []int{cr, lf}}.tape(),
			tapeEvent{msg: 0, ends: []int{lf, lf}}.tape(),
		),
		// A CR ending a comment, and the LF of a stray blank line.
		slices.Concat([]byte{3, 0, lineEnds(cr), 4, lineEnds(lf)}, tapeEvent{msg: 1, ends: []int{cr, cr}}.tape()),
		// A CR ending an event's blank line, and the LF of a stray one.
		slices.Concat(tapeEvent{msg: 0, ends: []int{cr, cr}}.tape(), []byte{4, lineEnds(lf)}, tapeEvent{msg: 2, ends: []int{crlf, lf}}.tape()),
		// A CR ending an event rewritten, and the LF of a comment.
		slices.Concat(tapeEvent{msg: 0, ends: []int{lf, cr}}.tape(), []byte{3, 0, lineEnds(lf)}),
	)
	return seeds
}

// cutAt cuts b at the ascending offsets cuts.
func cutAt(b []byte, cuts []int) [][]byte {
	var pieces [][]byte
	prev := 0
	for _, c := range cuts {
		pieces = append(pieces, b[prev:c])
		prev = c
	}
	return append(pieces, b[prev:])
}

// recorded is what one reading of a stream gave: the messages the hook was
// given, the bytes for the client, and the responses still owed.
type recorded struct {
	seen []string
	out  []byte
	owed []string
	left int
}

// readStream feeds stream, in writes cut at cuts, to a tracker of the
// answer to msgs with one hook: one that records each message it is given
// (watching), or, edit set, one that also edits each response with
// editResult.
func readStream(t testing.TB, msgs []jsonrpc.Message, stream []byte, edit bool, cuts []int) recorded {
	tr := newStream(msgs, sessionEra)
	require.NotNil(t, tr)
	var r recorded
	hook := &recordingHook{Asks: feature.Needs{Edit: edit}, Seen: &r.seen}
	if edit {
		hook.Edit = editResult
	}
	tr.hooks = &Hooks{id: json.RawMessage("1"), edit: edit}
	tr.hooks.list = append(tr.hooks.buf[:0], hook)
	tr.fx, tr.edit = &feature.Exchange{}, edit
	tr.fail = func(err error, _ json.RawMessage) []byte {
		t.Errorf("nothing in these streams is left unread, but: %v", err)
		return nil
	}
	for _, p := range cutAt(stream, cuts) {
		r.out = append(r.out, tr.observe(p)...)
	}
	r.owed, r.left = stateOf(tr).Owed, tr.owed.left
	return r
}

// editResult renames the first result member in msg; nil when it has none.
func editResult(msg []byte) []byte {
	if !bytes.Contains(msg, []byte(`"result":`)) {
		return nil
	}
	return bytes.Replace(msg, []byte(`"result":`), []byte(`"edited":true,"result":`), 1)
}

// clientReads is what a client reads of a stream: its events, and the ids
// of the responses it gets, in order.
func clientReads(stream []byte) (events []sseEvent, responses []string) {
	events, _ = sseClient(bytes.TrimPrefix(stream, byteOrderMark))
	for _, data := range messagesOf(events) {
		_, _ = jsonrpc.Each([]byte(data), func(m jsonrpc.Message) error {
			if m.Kind == jsonrpc.Response {
				responses = append(responses, string(m.ID))
			}
			return nil
		})
	}
	return events, responses
}

// stillOwed are the ids of the requests of msgs that responses with these
// ids leave unanswered: each response answers the first request still
// owed that has its id's bytes, or else the first a client may take it for
// (jsonrpc.MayAnswer).
func stillOwed(msgs []jsonrpc.Message, responses []string) []string {
	owed := make([]bool, len(msgs))
	for i, m := range msgs {
		owed[i] = m.Kind == jsonrpc.Request
	}
	for _, id := range responses {
		pick := -1
		for i, m := range msgs {
			if owed[i] && string(m.ID) == id {
				pick = i
				break
			}
			if owed[i] && pick < 0 && jsonrpc.MayAnswer(m.ID, []byte(id)) {
				pick = i
			}
		}
		if pick >= 0 {
			owed[pick] = false
		}
	}
	var ids []string
	for i, m := range msgs {
		if owed[i] {
			ids = append(ids, string(m.ID))
		}
	}
	return ids
}

// checkStreamReading reads stream in one write, in two cut at every byte,
// and a byte at a time, watching and editing, and holds every reading to
// what a client reads of it.
func checkStreamReading(t *testing.T, msgs []jsonrpc.Message, stream []byte) {
	events, responses := clientReads(stream)
	messages := dataOf(events)
	owed := stillOwed(msgs, responses)
	// What the editing hook is given (data that begins a JSON object or
	// array, of an event of any type: a client may read one of another
	// type as a message), and what the client then reads.
	var editable []string
	edited := slices.Clone(events)
	for i, e := range edited {
		if !jsonrpc.BeginsMessage([]byte(e.Data)) {
			continue
		}
		editable = append(editable, e.Data)
		if out := editResult([]byte(e.Data)); out != nil {
			edited[i].Data, edited[i].Type = string(out), "message" // sent as a message event
		}
	}

	whole := readStream(t, msgs, stream, true, nil)
	cuts := [][]int{nil}
	var bytewise []int
	for i := 1; i < len(stream); i++ {
		cuts = append(cuts, []int{i})
		bytewise = append(bytewise, i)
	}
	cuts = append(cuts, bytewise)
	for _, c := range cuts {
		watched := readStream(t, msgs, stream, false, c)
		if !assert.Equal(t, messages, watched.seen, "watching, cut at %v: the data of the events a client reads, in order", c) ||
			!assert.Equal(t, string(stream), string(watched.out), "watching, cut at %v: the client gets the stream as it came", c) ||
			!assert.Equal(t, owed, watched.owed, "watching, cut at %v: the responses still owed", c) ||
			!assert.Equal(t, len(owed), watched.left, "watching, cut at %v", c) {
			t.Logf("stream: %q", stream)
			return
		}
		got := readStream(t, msgs, stream, true, c)
		gotEvents, _ := clientReads(got.out)
		if !assert.Equal(t, editable, got.seen, "editing, cut at %v: the messages that may be edited, in order", c) ||
			!assert.Equal(t, string(whole.out), string(got.out), "editing, cut at %v: the same bytes for the client", c) ||
			!assert.Equal(t, edited, gotEvents, "editing, cut at %v: the client reads the events, edited", c) ||
			!assert.Equal(t, owed, got.owed, "editing, cut at %v: the responses still owed", c) ||
			!assert.Equal(t, len(owed), got.left, "editing, cut at %v", c) {
			t.Logf("stream: %q", stream)
			return
		}
	}
}

// FuzzEventStreamReadingHoweverCut holds the reading of an event stream for
// the hooks to one outcome, however the upstream's writes cut it: the
// messages a client reads reach the hooks, exactly and in order; watching,
// the client gets the stream byte for byte; editing, it gets the same bytes
// whatever the cuts, which a client reads as the upstream's events with
// the responses edited; and the same responses are left owed.
func FuzzEventStreamReadingHoweverCut(f *testing.F) {
	for _, s := range tapeSeeds() {
		f.Add(s)
	}
	msgs := parsed(f, readerRequest)
	f.Fuzz(func(t *testing.T, input []byte) {
		checkStreamReading(t, msgs, eventStreamFrom(input, 512))
	})
}

// jsonAnswerMax is the bound of the JSON answer the fuzzed hooks read;
// the fuzzed answers go up to maxFuzzedAnswer bytes.
const (
	jsonAnswerMax   = 128
	maxFuzzedAnswer = jsonAnswerMax + 64
)

// jsonSeeds are JSON answers, under the bound, at it, and over it.
var jsonSeeds = []string{
	"",
	resultOne,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad arguments"}}`,
	`[` + resultOne + `,` + progress + `]`,
	paddedResult(jsonAnswerMax),
	paddedResult(jsonAnswerMax + 1),
	paddedResult(maxFuzzedAnswer),
	"not JSON\r\n",
}

// paddedResult is a response of n bytes.
func paddedResult(n int) string {
	const head, tail = `{"jsonrpc":"2.0","id":1,"result":{"pad":"`, `"}}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// jsonAnswer is what the features of a jsonReader saw of one answer, and
// what the client got.
type jsonAnswer struct {
	// watched and edited are what the watching and the editing hook were
	// given; ends, how the answer ended, for each hook.
	watched, edited []string
	ends            []feature.Ending
	// early: the watching hook was given the answer before the client had
	// its last byte.
	early bool
	body  string
	// length is the Content-Length the client got.
	length string
}

// jsonReader reads the answer to callOne as the core does, with a watch
// whose hooks are one that watches it and, edit set, one that edits it
// with editResult.
type jsonReader struct {
	responders []feature.Responder
	// a is the answer being served; w, the client's side of it.
	a jsonAnswer
	w *httptest.ResponseRecorder
	// want is the length of the upstream's answer.
	want int
}

func newJSONReader(t *testing.T, edit bool) *jsonReader {
	r := &jsonReader{}
	watch := &recordingHook{Asks: feature.Needs{Max: jsonAnswerMax}, Seen: &r.a.watched,
		Then: func() { r.a.early = r.w.Body.Len() < r.want }}
	r.responders = append(r.responders, hookOpener{Hook: watch, Ends: &r.a.ends})
	if edit {
		editor := &recordingHook{Asks: feature.Needs{Edit: true, Max: jsonAnswerMax}, Seen: &r.a.edited, Edit: editResult}
		r.responders = append(r.responders, hookOpener{Hook: editor, Ends: &r.a.ends})
	}
	return r
}

// serve has the upstream answer body in writes cut at cuts, with a
// Content-Length when withLength.
func (r *jsonReader) serve(t *testing.T, body []byte, withLength bool, cuts []int) jsonAnswer {
	r.a, r.w, r.want = jsonAnswer{}, httptest.NewRecorder(), len(body)
	var u Watch
	fx := &feature.Exchange{Request: httptest.NewRequest(http.MethodPost, "/mcp", nil), Messages: parsed(t, callOne), Era: sessionEra}
	u.Start(r.w, fx, testCore{}, r.responders, nil, nil)
	u.Header().Set("Content-Type", "application/json")
	if withLength {
		u.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	u.WriteHeader(http.StatusOK)
	for _, p := range cutAt(body, cuts) {
		_, err := u.Write(p)
		require.NoError(t, err)
	}
	u.Finish()
	if u.State() == Holding {
		require.NoError(t, u.ReleaseRead())
	}
	u.Hooks().End(fx, u.Ending(nil, false))
	r.a.body, r.a.length = r.w.Body.String(), r.w.Header().Get("Content-Length")
	return r.a
}

// checkJSONReading serves body, whole and cut at every byte, with and
// without a Content-Length, watched and edited: each hook is given it once
// when it is within its bound, and not at all when it is empty.
func checkJSONReading(t *testing.T, body []byte) {
	readable := len(body) <= jsonAnswerMax
	var once []string
	want, wantEdited := string(body), string(body)
	if readable && len(body) > 0 { // an empty body is no message
		once = []string{string(body)}
		if out := editResult(body); out != nil {
			wantEdited = string(out)
		}
	}
	cuts := [][]int{nil}
	for i := 1; i < len(body); i++ {
		cuts = append(cuts, []int{i})
	}
	watching, editing := newJSONReader(t, false), newJSONReader(t, true)
	for _, withLength := range []bool{false, true} {
		for _, c := range cuts {
			a := watching.serve(t, body, withLength, c)
			if !assert.Equal(t, once, a.watched, "watched, Content-Length %v, cut at %v: given whole, once, within its bound", withLength, c) ||
				!assert.Equal(t, want, a.body, "watched, Content-Length %v, cut at %v: the client gets the answer as it came", withLength, c) ||
				!assert.Equal(t, []feature.Ending{feature.Complete}, a.ends, "watched, Content-Length %v, cut at %v", withLength, c) ||
				!assert.True(t, !readable || !withLength || len(body) == 0 || a.early, "watched, cut at %v: a declared length is read before the client has its last byte", c) {
				t.Logf("body: %q", body)
				return
			}
			a = editing.serve(t, body, withLength, c)
			if !assert.Equal(t, once, a.watched, "edited, Content-Length %v, cut at %v: the watching hook is given it whole, once", withLength, c) ||
				!assert.Equal(t, once, a.edited, "edited, Content-Length %v, cut at %v: the editing hook is given it whole, once", withLength, c) ||
				!assert.Equal(t, wantEdited, a.body, "edited, Content-Length %v, cut at %v", withLength, c) ||
				!assert.Equal(t, []feature.Ending{feature.Complete, feature.Complete}, a.ends, "edited, Content-Length %v, cut at %v", withLength, c) {
				t.Logf("body: %q", body)
				return
			}
			if withLength || readable {
				assert.Equal(t, strconv.Itoa(len(wantEdited)), a.length, "edited, cut at %v: the length of what is sent", c)
			}
		}
	}
}

// FuzzJSONAnswerReadingHoweverCut holds the reading of a JSON answer for
// the hooks to one outcome, however the upstream's writes cut it, with a
// Content-Length or without: each hook is given the whole answer exactly
// once when it is within the hook's bound, and never past it; the client
// gets it as it came, or edited.
func FuzzJSONAnswerReadingHoweverCut(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > maxFuzzedAnswer {
			return
		}
		checkJSONReading(t, body)
	})
}
