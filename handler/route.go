package handler

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/mirror"
)

// Where a request goes, and as what: a guest feature's feature.Answerer
// may answer it itself, a feature.Router send it to one of the handler's
// upstream routes (Upstreams: named lists of Caddy routes, each with its
// own reverse_proxy) instead of the next handler, and a feature.Rewriter
// rewrite its body on the way. A route that does not answer falls through
// to the next handler, as Caddy's subroute does.

// provisionUpstreams sets up the upstream routes' matchers and handlers.
func (h *Handler) provisionUpstreams(ctx caddy.Context) error {
	for _, name := range sortedNames(h.Upstreams) {
		if err := h.Upstreams[name].Provision(ctx); err != nil {
			return fmt.Errorf("upstreams %q: %w", name, err)
		}
	}
	return nil
}

// route is the handler the request of x goes on to: an answerer's own, the
// upstream route a router names, or next. ok is false when a router named a route the
// handler does not have: x has then been answered.
func (h *Handler) route(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) (caddyhttp.Handler, bool, error) {
	for _, a := range h.answerers {
		if own := a.Answer(x.view()); own != nil {
			opens := false
			if s, ok := a.(feature.SessionAnswerer); ok {
				opens = s.OpensSessions()
			}
			return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				own.ServeHTTP(&ownAnswerWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, opensSession: opens}, r)
				return nil
			}), true, nil
		}
	}
	for _, r := range h.routers {
		name := r.Route(x.view())
		if name == "" {
			continue
		}
		if holder, ok := r.(feature.RouteHolder); ok {
			if up := holder.Upstream(name); up != nil {
				return caddyhttp.HandlerFunc(up.ServeHTTP), true, nil
			}
		}
		routes, ok := h.Upstreams[name]
		if !ok {
			// Debug: a router may name a route from what a client sent.
			h.logger.Debug("a feature routed a request to an upstream route the handler does not have", zap.String("route", clip(name)))
			env := noUpstreamRoute(name)
			return nil, false, h.answer(w, x, &env, http.StatusBadGateway)
		}
		return routes.Compile(next), true, nil
	}
	return next, true, nil
}

// rewrite gives the rewriters the body going upstream (after the trace
// context was spliced in), and sends up what they make of it.
func (x *exchange) rewrite(rewriters []feature.Rewriter, up *http.Request) {
	if len(rewriters) == 0 || x.Body == nil {
		return
	}
	body := x.sentBody()
	changed := false
	for _, r := range rewriters {
		if b := r.Rewrite(x.view(), body); b != nil {
			body, changed = b, true
		}
	}
	if !changed {
		return
	}
	x.rewritten = body
	x.reader.Reset(body)
	up.ContentLength = int64(len(body))
	remirror(up.Header, body)
}

// remirror keeps a rewritten request's mirror headers (internal/mirror)
// saying what its body says: a server of MCP 2026-07-28 refuses a request
// whose Mcp-Name differs from the name in its body. A body that is no
// single message carries none.
func remirror(h http.Header, body []byte) {
	if h.Get("Mcp-Method") == "" && h.Get("Mcp-Name") == "" {
		return
	}
	var one [1]jsonrpc.Message
	msgs, batch, err := jsonrpc.Parse(body, one[:0], 1)
	if err != nil || batch || len(msgs) != 1 {
		h.Del("Mcp-Method")
		h.Del("Mcp-Name")
		return
	}
	m := &msgs[0]
	h.Set("Mcp-Method", string(m.Method))
	if _, value, _ := mirror.Of(m); value != nil && h.Get("Mcp-Name") != "" {
		h.Set("Mcp-Name", mirror.Encode(value))
	}
}

// ownAnswerWriter is what an answerer writes its answer to: unless the
// answerer opens sessions (feature.SessionAnswerer), no upstream opened a
// session, so a session id it gives (a cached answer's headers replayed)
// is not passed on, nor sealed into a token for the client.
type ownAnswerWriter struct {
	caddyhttp.ResponseWriterWrapper
	wrote, opensSession bool
}

func (w *ownAnswerWriter) WriteHeader(status int) {
	if !w.wrote && status >= 200 {
		w.wrote = true
		if !w.opensSession {
			w.Header().Del("Mcp-Session-Id")
		}
	}
	w.ResponseWriterWrapper.WriteHeader(status)
}

func (w *ownAnswerWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.Write(p)
}
