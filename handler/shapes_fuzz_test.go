package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// The core's answer reader against every shape an answer takes: under
// each status, as JSON or as an event stream, the call's id written back
// in each spelling, a result within a budget, over it, or never ending,
// cut by the upstream's writes anywhere. Whatever a client takes for the
// call's response, a hook that fails closed has held it to its budget.

// fuzzBudget is the budget of the hook that fails closed.
const fuzzBudget = 256

// budgetHook refuses the call's response past fuzzBudget, as a result's
// budget does (package results).
type budgetHook struct{ id json.RawMessage }

var errOverFuzzBudget = errors.New("over the budget")

func (budgetHook) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: fuzzBudget, MaxEvent: fuzzBudget, FailClosed: true}
}

func (b budgetHook) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	if len(msg) > fuzzBudget && jsonrpc.IsResponseTo(msg, b.id) {
		return nil, errOverFuzzBudget
	}
	return nil, nil
}

func (budgetHook) Unreadable(*feature.Exchange, error) envelope.Envelope {
	return envelope.New("TOO_LARGE", "over the budget").Envelope()
}

func (budgetHook) End(*feature.Exchange, feature.Ending) {}

type budgetOpener struct{}

func (budgetOpener) Open(x *feature.Exchange) feature.Hook { return budgetHook{id: x.Single().ID} }

// shapeStatuses are statuses clients read an answer under, and one they
// do not.
var shapeStatuses = []int{200, 201, 202, 203, 205, 206, 299, 404}

// shapeIDs spell the call's id, 1, back: each is read as 1 by one official
// client at least, but the last two.
var shapeIDs = []string{`1`, `1.0`, `1e0`, `"1"`, `" 1 "`, `1.5`, `"0x1"`, `"1_"`, `2`}

// answerShape is an answer built from a fuzz input, and the writes it
// comes in.
type answerShape struct {
	status int
	sse    bool
	id     string
	writes []string
}

// shapeFrom reads a fuzz input as an answer shape: its status, body, id
// spelling, size (within the budget, over it, or, for a stream, an event
// that never ends within what is written), the id before or after the
// result, and where the writes are cut.
func shapeFrom(input []byte) answerShape {
	tp := tape(input)
	s := answerShape{status: shapeStatuses[tp.Next(len(shapeStatuses))], sse: tp.Next(2) == 1, id: shapeIDs[tp.Next(len(shapeIDs))]}
	size := []int{10, fuzzBudget, 4 * fuzzBudget}[tp.Next(3)]
	text := strings.Repeat("x", size)
	msg := `{"jsonrpc":"2.0","id":` + s.id + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
	if tp.Next(2) == 1 {
		msg = `{"result":{"content":[{"type":"text","text":"` + text + `"}]},"jsonrpc":"2.0","id":` + s.id + `}`
	}
	body := msg
	if s.sse {
		body = "event: message\ndata: " + msg + "\n\n"
		if tp.Next(4) == 0 { // an event that does not end
			body = "event: message\ndata: " + msg[:len(msg)-2]
		}
	}
	for len(body) > 0 {
		n := 1 + tp.Next(64)*7
		n = min(n, len(body))
		s.writes = append(s.writes, body[:n])
		body = body[n:]
	}
	return s
}

// takenResponse is what a client takes for the response from an answer
// under status: the first response of the JSON body, or of the stream's
// message events (nil: none).
func takenResponse(status int, header http.Header, body []byte) []byte {
	if !answer.IsAnswer(status) {
		return nil
	}
	datas := [][]byte{body}
	if answer.IsEventStream(header) {
		datas = nil
		events, _ := sseClient(body)
		for _, data := range messagesOf(events) {
			datas = append(datas, []byte(data))
		}
	}
	for _, d := range datas {
		var taken []byte
		_, _ = jsonrpc.Each(d, func(m jsonrpc.Message) error {
			if m.Kind == jsonrpc.Response && taken == nil {
				taken = d
			}
			return nil
		})
		if taken != nil {
			return taken
		}
	}
	return nil
}

func checkShape(t *testing.T, s answerShape) {
	h := provision(t, &Handler{})
	h.responders = append(h.responders, budgetOpener{})
	hdr := map[string]string{"Content-Type": "application/json"}
	if s.sse {
		hdr["Content-Type"] = "text/event-stream"
	}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(callOne), answering(s.status, hdr, s.writes...)))
	taken := takenResponse(w.Code, w.Header(), w.Body.Bytes())
	if taken == nil {
		return
	}
	server := !bytes.Contains(taken, []byte("<tool_error")) // the gateway's words are no result of the server's
	if server && len(taken) > fuzzBudget {
		t.Fatalf("%d, %s, id %s: the client took %d bytes of the server's, over the budget: %.200s", s.status, hdr["Content-Type"], s.id, len(taken), taken)
	}
	if bytes.Contains(taken, []byte("TOO_LARGE")) {
		assert.Equal(t, "1", string(idOfResponse(taken)), "the refusal answers the call by its own id")
	}
}

// idOfResponse is a response's id as written.
func idOfResponse(msg []byte) []byte {
	var id []byte
	_, _ = jsonrpc.Each(msg, func(m jsonrpc.Message) error { id = m.ID; return nil })
	return id
}

// FuzzAFailClosedHookHoldsEveryAnswerShape holds the core to one promise,
// whatever the status, body, id spelling, size and writes of the answer:
// a client takes no response of the call over the budget of the hook that
// fails closed on it.
func FuzzAFailClosedHookHoldsEveryAnswerShape(f *testing.F) {
	for status := range len(shapeStatuses) {
		for id := range len(shapeIDs) {
			for _, rest := range [][]byte{{0, 2, 0}, {1, 2, 1}, {1, 2, 0, 0}, {0, 0, 0}} {
				f.Add(append([]byte{byte(status), rest[0], byte(id)}, rest[1:]...))
			}
		}
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) > 1024 {
			return
		}
		checkShape(t, shapeFrom(input))
	})
}

// The statuses a client reads an answer under: every success but 204.
func TestAnAnswerIsReadUnderEverySuccessButNoContent(t *testing.T) {
	for status := 100; status < 600; status++ {
		assert.Equal(t, status >= 200 && status < 300 && status != 204, answer.IsAnswer(status), strconv.Itoa(status))
	}
}
