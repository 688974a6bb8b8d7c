package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstreamDouble is an MCP server double: it answers every JSON-RPC POST
// with a tool result naming the tool ("ran echo"), echoing the request's id
// (a batch gets one result per request with an id; a message without one
// gets 202), and a GET with 405, as a server without a standalone stream
// does. Options make it hold requests until the test releases them, and
// check Content-Type as the Python SDK does.
//
// It counts what it receives: received, the POSTs; calls, the calls it is
// running now and the most it ever ran at once, a batch counting as many
// calls as it has messages. A call stops counting before its answer is
// written, so that the gateway cannot admit the next one while this one
// still counts. It keeps nothing else of what it receives.
type upstreamDouble struct {
	// addr is its "127.0.0.1:PORT".
	addr string

	received atomic.Int64
	calls    gauge
	// arrived gets, for each request the upstream holds, the number of
	// calls in it, once it is held.
	arrived chan int

	holds             func(msgs []upstreamMessage) bool
	pythonContentType bool
	tokens            chan struct{}
	open              chan struct{}
	openOnce          sync.Once
}

// An upstreamOption changes what the upstream double does.
type upstreamOption func(*upstreamDouble)

// holdAll holds every request that awaits an answer (one with an id)
// until it is released; notifications are taken at once.
func holdAll(u *upstreamDouble) {
	u.holds = func(msgs []upstreamMessage) bool {
		for _, m := range msgs {
			if len(m.ID) > 0 {
				return true
			}
		}
		return false
	}
}

// holdCallsOf holds the requests that call tool until they are released;
// the others are answered at once.
func holdCallsOf(tool string) upstreamOption {
	return func(u *upstreamDouble) {
		u.holds = func(msgs []upstreamMessage) bool {
			for _, m := range msgs {
				if m.Method == "tools/call" && m.Params.Name == tool {
					return true
				}
			}
			return false
		}
	}
}

// pythonContentType takes a request as the official Python SDK server does
// whatever its body: when some comma-separated part of its Content-Type is
// application/json (others get 415).
func pythonContentType(u *upstreamDouble) { u.pythonContentType = true }

// upstreamMessage is what the double reads of a request.
type upstreamMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

func startUpstream(t *testing.T, opts ...upstreamOption) *upstreamDouble {
	t.Helper()
	u := &upstreamDouble{
		holds:   func([]upstreamMessage) bool { return false },
		arrived: make(chan int, 1000),
		tokens:  make(chan struct{}, 1000),
		open:    make(chan struct{}),
	}
	for _, o := range opts {
		o(u)
	}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		u.releaseAll()
		srv.CloseClientConnections()
		srv.Close()
	})
	u.addr = strings.TrimPrefix(srv.URL, "http://")
	return u
}

func (u *upstreamDouble) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if u.pythonContentType && !pythonTakesContentType(r.Header.Get("Content-Type")) {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	body, _ := io.ReadAll(r.Body)
	u.received.Add(1)
	msgs := readMessages(body)
	n := int64(max(len(msgs), 1))
	u.calls.add(n)
	if u.holds(msgs) {
		u.arrived <- int(n)
		select {
		case <-u.tokens:
		case <-u.open:
		case <-r.Context().Done():
		}
	}
	u.calls.add(-n)
	if r.Context().Err() != nil {
		return
	}
	var answers []string
	for _, m := range msgs {
		if len(m.ID) > 0 {
			text, _ := json.Marshal("ran " + m.Params.Name)
			answers = append(answers, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`, m.ID, text))
		}
	}
	switch {
	case len(answers) == 0:
		w.WriteHeader(http.StatusAccepted)
	case bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")):
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "["+strings.Join(answers, ",")+"]")
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answers[0])
	}
}

// readMessages reads a message or a batch; NaN and Infinity are read as
// numbers, as the Python SDK reads them. A body it cannot read at all is
// one message with the id 1.
func readMessages(body []byte) []upstreamMessage {
	body = []byte(pythonNumbers.Replace(string(body)))
	var msgs []upstreamMessage
	if json.Unmarshal(body, &msgs) == nil {
		return msgs
	}
	var m upstreamMessage
	if json.Unmarshal(body, &m) != nil {
		m = upstreamMessage{ID: json.RawMessage("1")}
	}
	return []upstreamMessage{m}
}

// pythonNumbers replaces the numbers JSON does not have with one it has.
var pythonNumbers = strings.NewReplacer("-Infinity", "0", "Infinity", "0", "NaN", "0")

// pythonTakesContentType is the Python SDK server's check: some
// comma-separated part of the media type is application/json.
func pythonTakesContentType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	for part := range strings.SplitSeq(mt, ",") {
		if strings.TrimSpace(part) == "application/json" {
			return true
		}
	}
	return false
}

// release lets n held requests answer.
func (u *upstreamDouble) release(n int) {
	for range n {
		u.tokens <- struct{}{}
	}
}

// releaseAll lets every held request answer, and every request from now on
// pass at once.
func (u *upstreamDouble) releaseAll() { u.openOnce.Do(func() { close(u.open) }) }

// waitHeld waits until the upstream holds n more requests.
func (u *upstreamDouble) waitHeld(t *testing.T, n int) {
	t.Helper()
	for range n {
		u.nextHeld(t)
	}
}

// nextHeld waits for the next request the upstream holds, and returns the
// number of calls in it.
func (u *upstreamDouble) nextHeld(t *testing.T) int {
	t.Helper()
	select {
	case n := <-u.arrived:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream did not receive the request it was to hold")
		return 0
	}
}

// gauge counts what runs now, and remembers the most that ever ran at once.
type gauge struct {
	now, peak atomic.Int64
}

func (g *gauge) add(n int64) {
	now := g.now.Add(n)
	for p := g.peak.Load(); now > p && !g.peak.CompareAndSwap(p, now); p = g.peak.Load() {
	}
}
