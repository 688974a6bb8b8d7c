package handler

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// Routing: a guest feature's feature.Router may send a request to one of
// the handler's upstream routes (Upstreams: named lists of Caddy routes,
// each with its own reverse_proxy) instead of the next handler. A route
// that does not answer falls through to the next handler, as Caddy's
// subroute does.

// provisionUpstreams sets up the upstream routes' matchers and handlers.
func (h *Handler) provisionUpstreams(ctx caddy.Context) error {
	for _, name := range sortedNames(h.Upstreams) {
		if err := h.Upstreams[name].Provision(ctx); err != nil {
			return fmt.Errorf("upstreams %q: %w", name, err)
		}
	}
	return nil
}

// route is the handler the request of x goes on to: the upstream route a
// router names, or next. ok is false when a router named a route the
// handler does not have: x has then been answered.
func (h *Handler) route(w http.ResponseWriter, x *exchange, next caddyhttp.Handler) (caddyhttp.Handler, bool, error) {
	for _, r := range h.routers {
		name := r.Route(x.view())
		if name == "" {
			continue
		}
		routes, ok := h.Upstreams[name]
		if !ok {
			h.logger.Error("a feature routed a request to an upstream route the handler does not have", zap.String("route", name))
			env := noUpstreamRoute(name)
			return nil, false, h.answer(w, x, &env, http.StatusBadGateway)
		}
		return routes.Compile(next), true, nil
	}
	return next, true, nil
}
