package handler

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// What handlers share, and what they must agree on.
//
// A rate limit's buckets are identified by its name (and key template), and
// a named guard's places by its name (and key template and methods): every
// handler that uses a name shares them, across sites and across config
// reloads. So within one config, every handler that uses a name must give
// it the same settings; otherwise whichever handler was provisioned last
// would set the limit for all. Across a reload, the new config's settings
// apply to the shared state at once.
//
// An unnamed guard belongs to its handler alone. It is identified by its
// settings, and among handlers of one config with the same settings, by
// their order, so that a reload that keeps a site's concurrency block keeps
// its places (and capacity never doubles while the old config's requests
// finish).

// Declare records that a handler gives name these settings, in the map of
// its kind, and refuses settings that differ from another handler's.
func (l *load) Declare(kind, name, settings string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := kind + " " + name
	if prev, ok := l.declared[k]; ok && prev != settings {
		return fmt.Errorf("%s %q is configured differently by two mcp handlers of this config (%s, and %s): handlers that use one name share its state, so they must give it the same settings; rename one of them to keep them apart", kind, name, prev, settings)
	}
	l.declared[k] = settings
	return nil
}

// Ordinal numbers the unnamed guards of one config with the same settings,
// in provisioning order.
func (l *load) Ordinal(settings string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unnamed[settings]++
	return l.unnamed[settings]
}

// checkRoutes refuses, once per config, two mcp handlers that handle the same
// requests (see unconditionalMCP). Each would read and count every request,
// so a limit would count it twice.
//
// The config is read as it is being provisioned: Caddy drops a module's raw
// JSON once it has loaded it, so a route is read from its provisioned
// matchers and handlers when it has them, and from its JSON otherwise.
func (l *load) checkRoutes(ctx caddy.Context) error {
	l.mu.Lock()
	done := l.routesChecked
	l.routesChecked = true
	l.mu.Unlock()
	if done {
		return nil
	}
	mods := ctx.Modules()
	if len(mods) == 0 {
		return nil
	}
	app, ok := mods[0].(*caddyhttp.App)
	if !ok {
		return nil
	}
	for name, srv := range app.Servers {
		if _, err := unconditionalMCP(srv.Routes); err != nil {
			return fmt.Errorf("server %s: %w", name, err)
		}
	}
	return nil
}

var errDuplicateMCP = errors.New("two mcp handlers handle the same requests (two mcp blocks in one site, say): each would read and count every request; merge them into one mcp block, or give them matchers that tell their requests apart")

// unconditionalMCP counts the mcp handlers one request through routes can
// meet, and refuses two. Every request meets those in routes without
// matchers, and in the routes of their subroutes (a route block, say); a
// request a route's matchers select meets that route's too, so the most any
// one matched route adds is counted as well. (Matched routes are counted
// one at a time: handle blocks select one of them.)
func unconditionalMCP(routes caddyhttp.RouteList) (int, error) {
	every, most := 0, 0
	for _, r := range routes {
		n, nested := handlersOf(r)
		for _, list := range nested {
			inner, err := unconditionalMCP(list)
			if err != nil {
				return 0, err
			}
			n += inner
		}
		if len(r.MatcherSets) == 0 && len(r.MatcherSetsRaw) == 0 {
			every += n
		} else {
			most = max(most, n)
		}
	}
	if every+most > 1 {
		return every + most, errDuplicateMCP
	}
	return every + most, nil
}

// handlersOf counts the mcp handlers of a route and lists the routes of its
// subroutes, from its provisioned handlers or from its JSON.
func handlersOf(r caddyhttp.Route) (mcp int, nested []caddyhttp.RouteList) {
	for _, h := range r.Handlers {
		switch v := h.(type) {
		case *Handler:
			mcp++
		case *caddyhttp.Subroute:
			nested = append(nested, v.Routes)
		}
	}
	for _, raw := range r.HandlersRaw {
		var h struct {
			Handler string              `json:"handler"`
			Routes  caddyhttp.RouteList `json:"routes"`
		}
		if json.Unmarshal(raw, &h) != nil {
			continue
		}
		if h.Handler == "mcp" {
			mcp++
		}
		if len(h.Routes) > 0 {
			nested = append(nested, h.Routes)
		}
	}
	return mcp, nested
}
