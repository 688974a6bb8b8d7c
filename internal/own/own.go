// Package own sends the gateway's own requests upstream, through the rest
// of a client's route: the notifications/cancelled of a call the gateway
// stopped, the initialize and notifications/initialized that reopen a
// session the upstream lost (initialize.go, flights.go), and the GET that
// resumes a broken stream. Each is a request of its own, made from the
// client's: its credentials, and a copy of its variables (its session's
// pin, so that it reaches the replica the session is pinned to), with a
// replacer of its own, since the client's request may still be on its way
// through the route, which writes to both.
package own

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// bodyHeaders describe a client's body or name its message: none of them
// is true of a request the gateway makes of it.
var bodyHeaders = []string{"Content-Length", "Content-Encoding", "Transfer-Encoding", "Last-Event-Id", "Mcp-Method", "Mcp-Name", "Expect"}

var (
	contentTypeJSON = []string{"application/json"}
	acceptsBoth     = []string{"application/json, text/event-stream"}
)

// Post is a POST of body, under ctx, made from the client's request from,
// with header (a copy of it) in place of from's: what described from's
// body is left out, and it asks for JSON or an event stream.
func Post(ctx context.Context, from *http.Request, header http.Header, body []byte) *http.Request {
	r := from.Clone(ctx) // the route may write to its URL
	r.Header = header.Clone()
	r.Method, r.ContentLength, r.GetBody = http.MethodPost, int64(len(body)), nil
	r.Body = io.NopCloser(bytes.NewReader(body))
	for _, k := range bodyHeaders {
		delete(r.Header, k)
	}
	r.Header["Content-Type"] = contentTypeJSON
	r.Header["Accept"] = acceptsBoth
	return r
}

// Resume is the GET that resumes, after lastID, the stream that answered
// the client's request from, under ctx.
func Resume(ctx context.Context, from *http.Request, lastID string) *http.Request {
	r := from.Clone(ctx)
	r.Method, r.Body, r.ContentLength, r.GetBody = http.MethodGet, http.NoBody, 0, nil
	for _, k := range bodyHeaders {
		delete(r.Header, k)
	}
	delete(r.Header, "Content-Type")
	r.Header["Accept"] = []string{"text/event-stream"}
	r.Header["Last-Event-Id"] = []string{lastID}
	return r
}

// Prepare readies r to go through the route as Caddy readies a request it
// takes, answered to w: with a replacer of its own, and a copy of vars, the
// client's request's variables (Vars).
func Prepare(r *http.Request, vars map[string]any, w http.ResponseWriter) (*http.Request, *caddy.Replacer) {
	repl := caddy.NewReplacer()
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	r = caddyhttp.PrepareRequest(r, repl, w, srv)
	if own, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		maps.Copy(own, vars)
	}
	return r, repl
}

// Vars is a copy of the variables of r. A variable that points at a string
// (a session's pin) points at a copy: r's goroutine may write the string
// while the copy is read elsewhere.
func Vars(r *http.Request) map[string]any {
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	vars = maps.Clone(vars)
	for k, v := range vars {
		if p, ok := v.(*string); ok && p != nil {
			s := *p
			vars[k] = &s
		}
	}
	return vars
}

// Serve sends r through next: a panic of the route is its failure
// (reverse_proxy's http.ErrAbortHandler, when the upstream breaks its
// answer), not the client's request's.
func Serve(next caddyhttp.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the route panicked: %v", v)
		}
	}()
	return next.ServeHTTP(w, r)
}

// Cancelled is the notifications/cancelled of the request id, for reason.
func Cancelled(id []byte, reason string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":%q}}`, id, reason)
}

// Discard is the response writer of a request whose answer the gateway
// drops, but for its status.
type Discard struct {
	header http.Header
	status int
}

// Header is the answer's header.
func (d *Discard) Header() http.Header {
	if d.header == nil {
		d.header = make(http.Header)
	}
	return d.header
}

func (d *Discard) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}

func (d *Discard) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	return len(p), nil
}

func (d *Discard) Flush() {}

// Status is the answer's status, 0 when none was written.
func (d *Discard) Status() int { return d.status }
