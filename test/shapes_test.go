package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A scripted MCP server that answers each request in the shape the request
// asks for: under any status, in JSON or as an event stream, with the
// request's id written back in any spelling. The official SDKs' servers
// answer one way only; this one misbehaves on demand, so that every shape
// an answer can take is read through the gateway as a client reads it.

// shape is how the scripted server answers a request: a tools/call names it
// in its arguments, a tools/list in its params.cursor (JSON).
type shape struct {
	// Status is the HTTP status (0: 200).
	Status int `json:"status,omitempty"`
	// SSE answers with an event stream instead of JSON.
	SSE bool `json:"sse,omitempty"`
	// ID is how the request's id is written back (see spellID).
	ID string `json:"id,omitempty"`
	// Size is the length of a call result's text.
	Size int `json:"size,omitempty"`
	// IDLast writes the response's id after its result, as the TypeScript
	// SDK does.
	IDLast bool `json:"idLast,omitempty"`
	// Endless: the result's text never ends; the server writes it until the
	// gateway stops reading (at most endlessCap bytes). Trickle: it writes
	// Size bytes of it, then waits for the gateway to leave.
	Endless bool `json:"endless,omitempty"`
	Trickle bool `json:"trickle,omitempty"`
}

// upstreamSession is the session id the scripted server gives every
// initialize.
const upstreamSession = "scripted-session"

// endlessCap is where an endless answer ends all the same, so that a
// gateway that reads it to its end answers at last, wrongly, rather than
// never.
const endlessCap = 64 << 20

// The spellings of an id written back: each is read as the request's id by
// one official client at least (jsonrpc.MayAnswer says which).
var idSpellings = []string{"same", "float", "exp", "string", "spaced", "fraction"}

// spellID writes id (an integer, as the clients send it) back as spelling
// says.
func spellID(id json.RawMessage, spelling string) string {
	s := string(id)
	switch spelling {
	case "float":
		return s + ".0"
	case "exp":
		return s + "e0"
	case "string":
		return `"` + s + `"`
	case "spaced":
		return `" ` + s + ` "`
	case "fraction":
		return s + ".5" // the Go SDK truncates it
	}
	return s
}

// scripted is the server: what it was sent, for the tests to read.
type scripted struct {
	mu sync.Mutex
	// cancelled are the requestIds of the notifications/cancelled received.
	cancelled []string
	// wrote counts the bytes of endless or trickled answers written, and
	// stopped the ones whose client (the gateway) left before their end.
	wrote, stopped int
	// waiting is closed once a trickled answer has written its part and
	// waits; cancels receives each cancellation's requestId.
	waiting  chan struct{}
	waitOnce sync.Once
	cancels  chan string
}

// startScripted serves the scripted server on a free loopback port, and
// returns it and its endpoint.
func startScripted(t *testing.T) (*scripted, string) {
	s := &scripted{waiting: make(chan struct{}), cancels: make(chan string, 64)}
	return s, mcptest.ServeMCP(t, s)
}

type scriptedRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Cursor          string          `json:"cursor"`
		Arguments       json.RawMessage `json:"arguments"`
		RequestID       json.RawMessage `json:"requestId"`
	} `json:"params"`
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req scriptedRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var sh shape
	if h := r.Header.Get("X-Shape"); h != "" {
		// Any request may name its shape in a header; it wins over its
		// params.
		_ = json.Unmarshal([]byte(h), &sh)
	}
	switch req.Method {
	case "initialize":
		version := req.Params.ProtocolVersion
		w.Header().Set("Mcp-Session-Id", upstreamSession)
		writeAnswer(w, sh, req.ID, fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"scripted","version":"0"}}`, version))
		return
	case "notifications/cancelled":
		s.mu.Lock()
		s.cancelled = append(s.cancelled, string(req.Params.RequestID))
		s.mu.Unlock()
		s.cancels <- string(req.Params.RequestID)
		w.WriteHeader(http.StatusAccepted)
		return
	case "tools/list":
		if req.Params.Cursor != "" {
			_ = json.Unmarshal([]byte(req.Params.Cursor), &sh)
		}
		writeAnswer(w, sh, req.ID, scriptedTools)
		return
	case "tools/call":
		if r.Header.Get("X-Shape") == "" {
			_ = json.Unmarshal(req.Params.Arguments, &sh)
		}
	default:
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		writeAnswer(w, shape{}, req.ID, `{}`)
		return
	}
	if sh.Endless || sh.Trickle {
		s.stream(w, r, sh, req.ID)
		return
	}
	writeAnswer(w, sh, req.ID, `{"content":[{"type":"text","text":"`+strings.Repeat("x", sh.Size)+`"}],"isError":false}`)
}

// scriptedTools is the tool list: a tool every site shows, one the tool
// policy hides, and one whose schema takes a number below 10.
const scriptedTools = `{"tools":[{"name":"visible","inputSchema":{"type":"object"}},` +
	`{"name":"admin_reset","inputSchema":{"type":"object"}},` +
	`{"name":"small","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":9}},"required":["n"]}}]}`

// response is the response with result for id, spelt as sh says.
func response(sh shape, id json.RawMessage, result string) string {
	spelt := spellID(id, sh.ID)
	if sh.IDLast {
		return `{"result":` + result + `,"jsonrpc":"2.0","id":` + spelt + `}`
	}
	return `{"jsonrpc":"2.0","id":` + spelt + `,"result":` + result + `}`
}

// writeAnswer writes the response in sh's shape.
func writeAnswer(w http.ResponseWriter, sh shape, id json.RawMessage, result string) {
	msg := response(sh, id, result)
	status := sh.Status
	if status == 0 {
		status = http.StatusOK
	}
	if sh.SSE {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "event: message\ndata: "+msg+"\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// stream writes a response event whose text does not end: endlessly (up
// to endlessCap), or Size bytes of it before waiting for the gateway to
// leave. It counts what it wrote, and notes that the gateway left.
func (s *scripted) stream(w http.ResponseWriter, r *http.Request, sh shape, id json.RawMessage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	head := `event: message` + "\n" + `data: {"jsonrpc":"2.0","id":` + spellID(id, sh.ID) + `,"result":{"content":[{"type":"text","text":"`
	if sh.IDLast {
		head = "event: message\ndata: {\"result\":{\"content\":[{\"type\":\"text\",\"text\":\""
	}
	flush := http.NewResponseController(w).Flush
	_, err := io.WriteString(w, head)
	chunk := []byte(strings.Repeat("x", 64<<10))
	written := 0
	for err == nil && (sh.Endless && written < endlessCap || sh.Trickle && written < sh.Size) {
		_, err = w.Write(chunk)
		if err == nil {
			err = flush()
		}
		written += len(chunk)
	}
	if err == nil && sh.Trickle {
		s.waitOnce.Do(func() { close(s.waiting) })
		<-r.Context().Done()
		err = r.Context().Err()
	}
	if err == nil {
		_, _ = io.WriteString(w, `"}],"isError":false},"jsonrpc":"2.0","id":`+string(id)+"}\n\n")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote += written
	if err != nil {
		s.stopped++
	}
}

// seen is what the server saw: the ids of the cancellations it received,
// the bytes of endless and trickled answers it wrote, and how many of
// those the gateway left before their end.
func (s *scripted) seen() (cancelled []string, wrote, stopped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cancelled...), s.wrote, s.stopped
}

// waitCancelled waits for n cancellations, and returns the requestIds of
// all those received.
func (s *scripted) waitCancelled(t *testing.T, n int) []string {
	t.Helper()
	for range n {
		select {
		case <-s.cancels:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notifications/cancelled within 10s")
		}
	}
	cancelled, _, _ := s.seen()
	return cancelled
}

// callArgs are the arguments of a tools/call that asks for sh.
func callArgs(sh shape) map[string]any {
	var args map[string]any
	b, _ := json.Marshal(sh)
	_ = json.Unmarshal(b, &args)
	return args
}

// shapedCall is a tools/call of the tool "any" with the id 4, asking for
// sh.
func shapedCall(sh shape) string {
	b, _ := json.Marshal(sh)
	return `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"any","arguments":` + string(b) + `}}`
}

// shapedList is a tools/list with the id 4, asking for sh.
func shapedList(sh shape) string {
	b, _ := json.Marshal(sh)
	c, _ := json.Marshal(string(b))
	return `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":` + string(c) + `}}`
}
