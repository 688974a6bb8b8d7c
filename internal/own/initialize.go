package own

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// maxInitAnswer bounds what the gateway reads of the upstream's answer to
// the initialize it sends: a server's capabilities and instructions.
const maxInitAnswer = 256 << 10

// MaxSessionID bounds the session id an upstream gives a reopened
// session: the official SDKs' are under 40 bytes.
const MaxSessionID = 1 << 10

// reopenID is the id of the gateway's own initialize.
const reopenID = `"caddy-mcp-reopen"`

// Initialize opens a new session, as the client of from would, on the
// upstream from's session is pinned to (vars, its variables: Vars):
// initialize with params, then notifications/initialized, through next,
// within ctx. It returns the new session's id and the initialize request
// sent.
func Initialize(ctx context.Context, from *http.Request, vars map[string]any, next caddyhttp.Handler, params []byte) (string, *http.Request, error) {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":"initialize","params":%s}`, reopenID, params)
	init, answer := sessionPost(ctx, from, vars, body, "")
	if err := Serve(next, answer, init); err != nil {
		return "", nil, fmt.Errorf("initialize: %w", err)
	}
	id := answer.header.Get("Mcp-Session-Id")
	if err := answer.initialized(); err != nil || id == "" {
		return "", nil, errors.Join(err, errors.New("the upstream's answer to initialize named no session"))
	}
	if len(id) > MaxSessionID {
		return "", nil, fmt.Errorf("the upstream's new session id is %d bytes long, over the %d the gateway keeps", len(id), MaxSessionID)
	}
	notify, ack := sessionPost(ctx, from, vars, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), id)
	err := Serve(next, ack, notify)
	if err != nil || ack.status >= 300 {
		return "", nil, fmt.Errorf("notifications/initialized: status %d: %w", ack.status, err)
	}
	return id, init, nil
}

// sessionPost is a POST of body made from the client's request from,
// under session (none when empty), with vars, and the writer that keeps
// its answer.
func sessionPost(ctx context.Context, from *http.Request, vars map[string]any, body []byte, session string) (*http.Request, *ownAnswer) {
	r := Post(ctx, from, from.Header, body)
	delete(r.Header, "Accept-Encoding")
	if session != "" {
		r.Header["Mcp-Session-Id"] = []string{session}
	} else {
		delete(r.Header, "Mcp-Session-Id")
		delete(r.Header, "Mcp-Protocol-Version") // initialize names its version in its params
	}
	answer := &ownAnswer{header: make(http.Header)}
	r, _ = Prepare(r, vars, answer)
	return r, answer
}

// ownAnswer keeps the answer to a request the gateway sent itself, up to
// maxInitAnswer bytes.
type ownAnswer struct {
	header http.Header
	status int
	body   []byte
}

func (a *ownAnswer) Header() http.Header { return a.header }

func (a *ownAnswer) WriteHeader(status int) {
	if a.status == 0 && status >= 200 {
		a.status = status
	}
}

func (a *ownAnswer) Write(p []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	if len(a.body)+len(p) > maxInitAnswer {
		return 0, errors.New("the answer to initialize is larger than the gateway reads")
	}
	a.body = append(a.body, p...)
	return len(p), nil
}

// initialized reports whether the answer holds the result of the gateway's
// initialize: in JSON, or as an event of a stream.
func (a *ownAnswer) initialized() error {
	if a.status != http.StatusOK {
		return fmt.Errorf("initialize: status %d", a.status)
	}
	if !answer.IdentityEncoded(a.header) {
		return errors.New("initialize: the upstream's answer is compressed, though the gateway asked for it plain")
	}
	if !answer.IsEventStream(a.header) {
		return initResult(a.body)
	}
	var events initEvents
	sc := sse.Scanner{Max: maxInitAnswer}
	sc.Write(a.body, &events)
	if events.found {
		return nil
	}
	return errors.New("initialize: no result in the upstream's stream")
}

// initEvents follows the event stream answering the gateway's initialize,
// as clients read it, to find its result.
type initEvents struct {
	data  []byte
	lines int
	found bool
}

func (f *initEvents) Follow(e sse.Event) {
	switch {
	case e.Kind == sse.Field && string(e.Name) == "data":
		if f.lines > 0 {
			f.data = append(f.data, '\n')
		}
		f.data = append(f.data, e.Value...)
		f.lines++
	case e.Kind == sse.Blank:
		f.found = f.found || (f.lines > 0 && initResult(f.data) == nil)
		f.data, f.lines = f.data[:0], 0
	}
}

// initResult reports whether msg is the result of the gateway's initialize.
func initResult(msg []byte) error {
	r, err := jsonrpc.Result(msg, json.RawMessage(reopenID))
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if r.End == 0 {
		return fmt.Errorf("initialize: the upstream answered %.200s", msg)
	}
	return nil
}

// AnswersRequest reports whether body holds a JSON-RPC response to one of
// requests: an upstream that lost the session answers none (the Go
// SDK's servers answer in plain text, the TypeScript SDK's with a null
// id).
func AnswersRequest(body []byte, requests []jsonrpc.Message) bool {
	var buf [1]jsonrpc.Message
	msgs, _, err := jsonrpc.Parse(body, buf[:0], 16)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if m.Kind != jsonrpc.Response {
			continue
		}
		for _, req := range requests {
			if req.Kind == jsonrpc.Request && jsonrpc.MayAnswer(req.ID, m.ID) {
				return true
			}
		}
	}
	return false
}
