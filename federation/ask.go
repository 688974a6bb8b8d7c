package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/own"
)

// The gateway's own requests to a server: a list, an initialize, a
// notification sent to every server. Each is made from the client's
// request (its credentials, its protocol version), goes through the
// server's route, and its answer is read within a bound.

// reply is what a server answered a request the gateway sent it.
type reply struct {
	status    int
	sessionID string
	// replica is the replica lb_policy mcp_session chose, "" none.
	replica string
	// stream: the server answered with an event stream.
	stream bool
	// result is the JSON-RPC result; rpcErr the error, when it answered
	// one.
	result, rpcErr json.RawMessage
}

// errSessionLost: the server answered 404 to the session it was asked
// under: it lost it (it restarted).
var errSessionLost = errors.New("the server lost the session (HTTP 404)")

// errTooLarge: the server answered more than the gateway reads.
var errTooLarge = errors.New("the answer is over the bound read of it")

// ask sends body to s from the client's request from (vars, its
// variables), under the server's session sid ("" none), and returns its
// answer, read up to max bytes. A body that is a notification gets no
// result.
func (f *federation) ask(ctx context.Context, from *http.Request, vars map[string]any, s *server, sid, method string, body []byte, max int64) (reply, error) {
	r := own.Post(ctx, from, from.Header, body)
	delete(r.Header, "Accept-Encoding")
	delete(r.Header, "Mcp-Session-Id")
	delete(r.Header, "Cookie")
	if sid != "" {
		r.Header["Mcp-Session-Id"] = []string{sid}
	}
	r.Header["Mcp-Method"] = []string{method}
	w := &kept{header: http.Header{}, max: max}
	r, _ = own.Prepare(r, vars, w)
	err := own.Serve(s.route, w, r)
	rep := reply{status: w.status, sessionID: w.header.Get("Mcp-Session-Id"), replica: replicaOf(r),
		stream: strings.HasPrefix(w.header.Get("Content-Type"), "text/event-stream")}
	switch {
	case w.over:
		return rep, errTooLarge
	case err != nil:
		return rep, err
	case w.status == http.StatusNotFound && sid != "":
		return rep, errSessionLost
	case w.status >= 300:
		return rep, fmt.Errorf("the server answered HTTP %d: %s", w.status, clipBytes(bytes.TrimSpace(w.body.Bytes())))
	case w.status == http.StatusAccepted:
		return rep, nil
	}
	var id json.RawMessage
	if m := oneMessage(body); m != nil && m.Kind == jsonrpc.Request {
		id = m.ID
	}
	return rep, rep.read(w, id)
}

// read finds the response to the request id in the answer w kept: a JSON
// body, or the first event of a stream that holds it.
func (rep *reply) read(w *kept, id json.RawMessage) error {
	ct, _, _ := mime.ParseMediaType(w.header.Get("Content-Type"))
	if ct != "text/event-stream" {
		return rep.readMessage(w.body.Bytes(), id)
	}
	for data := range events(w.body.Bytes()) {
		if err := rep.readMessage(data, id); err == nil {
			return nil
		}
	}
	return errors.New("the server's event stream held no response")
}

// readMessage reads a JSON-RPC response to the request id (nil: any).
func (rep *reply) readMessage(b []byte, id json.RawMessage) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("the server's answer is no JSON-RPC response: %w", err)
	}
	if m.Result == nil && m.Error == nil {
		return errors.New("the server's answer is no JSON-RPC response")
	}
	if id != nil && !jsonrpc.MayAnswer(id, m.ID) {
		return fmt.Errorf("the server's answer is to another request: id %s", clipBytes(m.ID))
	}
	rep.result, rep.rpcErr = m.Result, m.Error
	return nil
}

// events yields the data of each event of an event stream.
func events(stream []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		var data []byte
		for len(stream) > 0 {
			line, rest, _ := bytes.Cut(stream, []byte("\n"))
			stream = rest
			line = bytes.TrimSuffix(line, []byte("\r"))
			if len(line) == 0 {
				if data != nil && !yield(data) {
					return
				}
				data = nil
				continue
			}
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				v = bytes.TrimPrefix(v, []byte(" "))
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, v...)
			}
		}
		if data != nil {
			yield(data)
		}
	}
}

// kept keeps a server's answer to the gateway's own request, up to max
// bytes; past it, over is set and the rest is dropped.
type kept struct {
	header http.Header
	status int
	body   bytes.Buffer
	max    int64
	over   bool
}

func (k *kept) Header() http.Header { return k.header }

func (k *kept) WriteHeader(status int) {
	if k.status == 0 && status >= 200 {
		k.status = status
	}
}

func (k *kept) Write(p []byte) (int, error) {
	k.WriteHeader(http.StatusOK)
	if room := k.max - int64(k.body.Len()); int64(len(p)) > room {
		k.over = true
		k.body.Write(p[:max(room, 0)])
		return 0, errTooLarge
	}
	return k.body.Write(p)
}

func (k *kept) Flush() {}
