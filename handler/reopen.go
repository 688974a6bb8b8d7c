package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// Reopening a session the upstream lost. A stateful server that restarted
// answers 404 to every session it held: the official clients then drop
// theirs, and the Go SDK's closes the whole client session on its
// standalone GET before the model makes another call. When a hook can
// give the request a new upstream session (feature.Reopener: sessions,
// whose token carries the client's initialize), the 404 is held back, the
// gateway initializes a new session on the same upstream on the client's
// behalf (initialize with the client's params, then
// notifications/initialized), and sends the request again under it, once:
// a 404 means the upstream never ran it. The client keeps the session id
// it holds, and sees the answer to its request. When anything of this
// fails, the client gets the upstream's 404 as it was.

// maxInitAnswer bounds what the gateway reads of the upstream's answer to
// the initialize it sends: a server's capabilities and instructions.
const maxInitAnswer = 256 << 10

// maxReopenedID bounds the session id an upstream gives a reopened
// session: the official SDKs' are under 40 bytes.
const maxReopenedID = 1 << 10

// reopenID is the id of the gateway's own initialize.
const reopenID = `"caddy-mcp-reopen"`

// reopenTimeout bounds the gateway's own initialize and
// notifications/initialized.
const reopenTimeout = cancelTimeout

// mayReopen readies the watch to reopen the session of x, when a hook can
// and the request can be sent again: a POST whose body was read whole, or
// a GET.
func (h *Handler) mayReopen(x *exchange, u *answer.Watch) {
	switch {
	case !x.Era.Resumes():
		// From MCP 2026-07-28 on there are no sessions: a 404 is a
		// method the server does not know.
		return
	case x.Request.Method == http.MethodGet:
	case x.Request.Method == http.MethodPost && x.Body != nil && x.stream == nil:
	default:
		return
	}
	for _, hook := range u.Hooks().List() {
		if r, ok := hook.(feature.Reopener); ok {
			if params, ok := r.Reinitialize(&x.Exchange); ok {
				u.Reopen = &answer.Reopening{Hook: r, Params: params, Header: u.Header().Clone()}
				return
			}
		}
	}
}

// reopenAndResend reopens the session the upstream answered 404 for, and
// sends the request again under the new one, through up; it returns what
// the proxy returned for it. When the session cannot be reopened, the
// held 404 is sent as the upstream wrote it.
func (h *Handler) reopenAndResend(x *exchange, u *answer.Watch, up *http.Request, next caddyhttp.Handler) error {
	ro := u.Reopen
	u.Reopen = nil
	if answersRequest(u.HeldBody(), x) {
		// A JSON-RPC response to the request: the server read it, and
		// may have run it. Its session is not what it lacks.
		return u.Release()
	}
	key := x.Replica + "\x00" + x.Request.Header.Get("Mcp-Session-Id")
	if p := x.Principal; p != nil {
		// Two callers never share a reopen, whatever ids an upstream
		// hands out.
		key += "\x00" + p.Issuer + "\x00" + p.Subject
	}
	fl, err := h.reopenOnce(x, ro.Params, key, up, next)
	if err != nil {
		return u.Release()
	}
	if x.Request.Context().Err() != nil || u.Cancelled.Load() {
		// The client left, and the upstream may have been told to stop:
		// nobody waits for the request sent again.
		return u.Release()
	}
	ro.Hook.Reopened(&x.Exchange, fl.init, fl.id)
	// The request again, as it was, under the new session: its body from
	// its start, the answer's header as before the 404.
	hdr := u.Header()
	clear(hdr)
	maps.Copy(hdr, ro.Header)
	u.Rewait()
	if up.Method == http.MethodGet {
		// The stream it would resume died with the old session.
		delete(up.Header, "Last-Event-Id")
	} else {
		// A copy: the first request's transport may not have let go of
		// the body yet (an upstream may answer before it read it), and
		// the buffer goes back to the pool once it has.
		up.Body, up.GetBody = io.NopCloser(bytes.NewReader(bytes.Clone(x.sentBody()))), nil
	}
	return next.ServeHTTP(u, up)
}

// reopenOnce reopens the session key names, or joins the reopen under way
// or just ended. A joiner whose reopen failed leads one of its own, once:
// a failure (the server still starting, slow to answer) is no answer for
// the requests that come after it.
func (h *Handler) reopenOnce(x *exchange, params []byte, key string, up *http.Request, next caddyhttp.Handler) (*reopenFlight, error) {
	for attempt := 0; ; attempt++ {
		fl, lead := h.reopens.join(key)
		if lead {
			id, init, err := h.reinitialize(x, params, next)
			h.reopens.finish(fl, id, init, err)
			if err != nil {
				h.logger.Warn("the upstream lost the session, and a new one could not be opened: the client is told the session is gone",
					zap.Error(err))
			}
			return fl, err
		}
		select {
		case <-fl.done:
		case <-up.Context().Done():
			return nil, context.Cause(up.Context())
		}
		if fl.err == nil || attempt > 0 {
			return fl, fl.err
		}
	}
}

// sentBody is the body as it goes upstream: with the messages' trace
// context when the request is traced, as the rewriters left it.
func (x *exchange) sentBody() []byte {
	if x.rewritten != nil {
		return x.rewritten
	}
	return x.Body
}

// reinitialize sends initialize with params, then notifications/initialized,
// through next, as x's client would, to the upstream x's session is pinned
// to, and returns the new session's id and the initialize request sent.
func (h *Handler) reinitialize(x *exchange, params []byte, next caddyhttp.Handler) (string, *http.Request, error) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(x.Request.Context()), reopenTimeout)
	defer stop()
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":"initialize","params":%s}`, reopenID, params)
	init, answer, err := h.sendOwnRequest(ctx, x, body, "")
	if err == nil {
		err = serveOwn(next, answer, init)
	}
	if err != nil {
		return "", nil, fmt.Errorf("initialize: %w", err)
	}
	id := answer.header.Get("Mcp-Session-Id")
	if err := answer.initialized(); err != nil || id == "" {
		return "", nil, errors.Join(err, errors.New("the upstream's answer to initialize named no session"))
	}
	if len(id) > maxReopenedID {
		return "", nil, fmt.Errorf("the upstream's new session id is %d bytes long, over the %d the gateway keeps", len(id), maxReopenedID)
	}
	notify, ack, err := h.sendOwnRequest(ctx, x, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), id)
	if err == nil {
		err = serveOwn(next, ack, notify)
	}
	if err != nil || ack.status >= 300 {
		return "", nil, fmt.Errorf("notifications/initialized: status %d: %w", ack.status, err)
	}
	return id, init, nil
}

// serveOwn sends a request of the gateway's own through next: a panic of
// the route is its failure (reverse_proxy's ErrAbortHandler, when the
// upstream breaks its answer), not the client's request's.
func serveOwn(next caddyhttp.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the route panicked: %v", v)
		}
	}()
	return next.ServeHTTP(w, r)
}

// sendOwnRequest makes a POST of body with x's credentials and variables
// (its pin), under session id (none when empty), and the writer that
// keeps its answer, to be sent with serveOwn.
func (h *Handler) sendOwnRequest(ctx context.Context, x *exchange, body []byte, session string) (*http.Request, *ownAnswer, error) {
	r := x.Request.Clone(ctx)
	r.Method, r.ContentLength, r.GetBody = http.MethodPost, int64(len(body)), nil
	r.Body = io.NopCloser(bytes.NewReader(body))
	for _, k := range []string{"Content-Length", "Content-Encoding", "Transfer-Encoding", "Last-Event-Id", "Mcp-Method", "Mcp-Name", "Expect", "Mcp-Session-Id", "Accept-Encoding"} {
		delete(r.Header, k)
	}
	if session != "" {
		r.Header["Mcp-Session-Id"] = []string{session}
	} else {
		delete(r.Header, "Mcp-Protocol-Version") // initialize names its version in its params
	}
	r.Header["Content-Type"] = contentTypeJSON
	r.Header["Accept"] = []string{"application/json, text/event-stream"}
	answer := &ownAnswer{header: make(http.Header)}
	srv, _ := x.Request.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	vars := requestVars(x)
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), answer, srv)
	own, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if !ok {
		return nil, nil, errors.New("no request variables")
	}
	maps.Copy(own, vars)
	return r, answer, nil
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

// answersRequest reports whether body holds a JSON-RPC response to a
// request of x: an upstream that lost the session answers none (the Go
// SDK's servers answer in plain text, the TypeScript SDK's with a null
// id).
func answersRequest(body []byte, x *exchange) bool {
	var buf [1]jsonrpc.Message
	msgs, _, err := jsonrpc.Parse(body, buf[:0], 16)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if m.Kind != jsonrpc.Response {
			continue
		}
		for _, req := range x.Messages {
			if req.Kind == jsonrpc.Request && jsonrpc.MayAnswer(req.ID, m.ID) {
				return true
			}
		}
	}
	return false
}
