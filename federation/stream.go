package federation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/own"
)

// Messages both ways. A server's own requests to the client (sampling,
// elicitation, roots) are given an id that names the server and holds
// the id the server gave them, so that the client's response, whichever
// node it reaches, goes back to the server that asked, with its own id:
// two servers that both ask with id 0 never get each other's answer. The
// client's GET stream carries every server's messages: the federation
// opens each server's stream for the session and merges their events.

// idPrefix begins the id of a server's request as the client sees it:
// "federation/<server>/<base64url of the server's id>".
const idPrefix = "federation/"

// clientID is the id the client sees for the request id of server s.
func clientID(s *server, id json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(idPrefix + s.name + "/" + base64.RawURLEncoding.EncodeToString(id))
	return b
}

// serverID reads an id clientID wrote: the server, and its own id.
func (f *federation) serverID(id []byte) (*server, json.RawMessage, bool) {
	var text string
	if json.Unmarshal(id, &text) != nil {
		return nil, nil, false
	}
	rest, ok := strings.CutPrefix(text, idPrefix)
	if !ok {
		return nil, nil, false
	}
	name, encoded, ok := strings.Cut(rest, "/")
	s, known := f.byName[name]
	if !ok || !known {
		return nil, nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil || !json.Valid(raw) || !scalar(raw) {
		return nil, nil, false
	}
	return s, raw, true
}

// scalar reports whether the JSON value id is a string or a number, what
// an id may be: an id the client wrote itself could hold an object.
func scalar(id []byte) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// withID is msg with its id replaced by id; nil when msg is no object.
func withID(msg []byte, id json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return nil
	}
	m["id"] = id
	out, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return out
}

// fromServer is a message of server s (m, as read from msg) as the
// client gets it: a request of its own with the id the client sees; a
// list_changed noted. nil: msg as it is.
func (f *federation) fromServer(s *server, msg []byte, m *jsonrpc.Message) []byte {
	if m == nil {
		return nil
	}
	switch {
	case m.Kind == jsonrpc.Request:
		return withID(msg, clientID(s, m.ID))
	case bytes.HasSuffix(m.Method, []byte("/list_changed")):
		f.changed.Add(1)
		listsChanged.WithLabelValues(s.name).Inc()
	}
	return nil
}

// maxEvent bounds an event of a server's stream that the merged stream
// reads, all its data lines together; a server whose event is longer is
// dropped from it.
const maxEvent = 1 << 20

// errEventTooLong: a server's event is over maxEvent.
var errEventTooLong = errors.New("the server's event is over the bound read of it")

// mergeStreams answers the client's GET with every server's stream of the
// session, merged: each server's events as they come, each a message event
// with no id (the merged stream is not resumed: a client that reconnects
// opens the servers' streams anew). It ends once every server's stream
// ended, or the client left. No server with a stream: 405, as a server
// that offers none answers.
func (f *federation) mergeStreams(w http.ResponseWriter, r *http.Request, d *decision) {
	if d.o == nil {
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	ctx := r.Context()
	vars := own.Vars(r)
	events := make(chan []byte)
	// pending counts the servers that have not answered their GET yet;
	// streaming is closed once one answered with a stream.
	var pending, streams sync.WaitGroup
	streaming := make(chan struct{})
	var once sync.Once
	opened := func(ok bool) {
		if ok {
			once.Do(func() { close(streaming) })
		}
		pending.Done()
	}
	for _, s := range f.servers {
		sid := d.o.ids[s.name]
		if sid == "" {
			continue
		}
		pending.Add(1)
		streams.Go(func() {
			defer f.recover("federation stream")
			if err := f.follow(ctx, r, varsFor(vars, d.o, s), s, sid, opened, events); err != nil {
				f.logger.Debug("a server's stream ended", zap.String("server", s.name), zap.Error(err))
			}
		})
	}
	go func() {
		defer f.recover("federation stream")
		streams.Wait()
		close(events)
	}()
	if !anyStream(streaming, &pending) {
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		for range events { //nolint:revive // drained until every server's goroutine ended
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for data := range events {
		out := append(append([]byte("event: message\ndata: "), data...), '\n', '\n')
		if _, err := w.Write(out); err != nil {
			break
		}
		_ = rc.Flush()
	}
	for range events { //nolint:revive // drained until every server's goroutine ended
	}
}

// anyStream waits until a server answered with a stream (streaming
// closed), or every server answered (pending done), and reports whether
// one did.
func anyStream(streaming <-chan struct{}, pending *sync.WaitGroup) bool {
	answered := make(chan struct{})
	go func() {
		pending.Wait()
		close(answered)
	}()
	select {
	case <-streaming:
		return true
	case <-answered:
		select {
		case <-streaming:
			return true
		default:
			return false
		}
	}
}

// follow opens s's stream for the session sid and sends each message of
// it to events, rewritten for the client, until it ends or ctx does.
// opened is called once s answered the GET, with a stream or not.
func (f *federation) follow(ctx context.Context, from *http.Request, vars map[string]any, s *server, sid string, opened func(bool), events chan<- []byte) error {
	pr, pw := io.Pipe()
	sw := &piped{header: http.Header{}, pw: pw, answered: make(chan int, 1)}
	get := from.Clone(ctx)
	get.Header = from.Header.Clone()
	get.Header["Mcp-Session-Id"] = []string{sid}
	delete(get.Header, "Last-Event-Id")
	delete(get.Header, "Accept-Encoding")
	get.Header["Accept"] = []string{"text/event-stream"}
	get, _ = own.Prepare(get, vars, sw)
	go func() {
		defer f.recover("federation stream")
		err := own.Serve(s.route, sw, get)
		sw.answer(0)
		_ = pw.CloseWithError(errors.Join(err, io.EOF))
	}()
	status := <-sw.answered
	if status != http.StatusOK || !strings.HasPrefix(sw.contentType, "text/event-stream") {
		opened(false)
		_ = pr.CloseWithError(errors.New("not a stream"))
		return errors.New("the server offers no stream")
	}
	opened(true)
	defer pr.Close()
	return f.relay(ctx, pr, s, events)
}

// relay sends each message of s's stream to events, rewritten for the
// client, until the stream ends or ctx does.
func (f *federation) relay(ctx context.Context, stream io.Reader, s *server, events chan<- []byte) error {
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 0, 4096), maxEvent)
	var data []byte
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
				if len(data) > maxEvent {
					// Many lines, each under the scanner's bound: the
					// event as a whole is held to it too.
					return errEventTooLong
				}
			}
			continue
		}
		msg := data
		m := oneMessage(msg)
		if m == nil && (len(data) == 0 || !json.Valid(data)) {
			data = nil // a priming event, or no message
			continue
		}
		if m != nil && m.Kind == jsonrpc.Response {
			// A stream of no request answers none: a response here could
			// answer a request the client sent another server.
			strayResponses.WithLabelValues(s.name).Inc()
			data = nil
			continue
		}
		if out := f.fromServer(s, msg, m); out != nil {
			msg = out
		}
		data = nil
		select {
		case events <- bytes.ReplaceAll(msg, []byte("\n"), nil):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return sc.Err()
}

// piped is the writer of a server's GET answer: its header, then its body
// through a pipe the merged stream reads. contentType is the header's, as
// it was when the server answered: the route may go on writing to its
// header map while the merged stream reads the body.
type piped struct {
	header      http.Header
	pw          *io.PipeWriter
	answered    chan int
	contentType string
	once        sync.Once
}

func (p *piped) Header() http.Header { return p.header }

func (p *piped) answer(status int) {
	p.once.Do(func() {
		p.contentType = p.header.Get("Content-Type")
		p.answered <- status
	})
}

func (p *piped) WriteHeader(status int) {
	if status >= 200 {
		p.answer(status)
	}
}

func (p *piped) Write(b []byte) (int, error) {
	p.answer(http.StatusOK)
	return p.pw.Write(b)
}

func (p *piped) Flush() {}
