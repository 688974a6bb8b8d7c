package configs

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// CheckRoutes refuses, once per config, two mcp handlers that handle the
// same requests (see unconditionalMCP). Each would read and count every
// request, so a limit would count it twice.
//
// The config is read as it is being provisioned: Caddy drops a module's raw
// JSON once it has loaded it, so a route is read from its provisioned
// matchers and handlers when it has them, and from its JSON otherwise.
func (l *Load[H]) CheckRoutes(ctx caddy.Context) error {
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
		if _, err := unconditionalMCP[H](srv.Routes, l.reg.Name); err != nil {
			return fmt.Errorf("server %s: %w", name, err)
		}
	}
	return nil
}

var errDuplicateMCP = errors.New("two mcp handlers handle the same requests (two mcp blocks in one site, say): each would read and count every request; merge them into one mcp block, or give them matchers that tell their requests apart")

// unconditionalMCP counts the mcp handlers (of type H, or named name in
// JSON) one request through routes can meet, and refuses two. Every
// request meets those in routes without matchers, and in the routes of
// their subroutes (a route block, say); a request a route's matchers
// select meets that route's too, so the most any one matched route adds is
// counted as well. (Matched routes are counted one at a time: handle
// blocks select one of them.)
func unconditionalMCP[H any](routes caddyhttp.RouteList, name string) (int, error) {
	every, most := 0, 0
	for _, r := range routes {
		n, nested := handlersOf[H](r, name)
		for _, list := range nested {
			inner, err := unconditionalMCP[H](list, name)
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
func handlersOf[H any](r caddyhttp.Route, name string) (mcp int, nested []caddyhttp.RouteList) {
	for _, h := range r.Handlers {
		if _, ok := h.(H); ok {
			mcp++
		} else if v, ok := h.(*caddyhttp.Subroute); ok {
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
		if h.Handler == name {
			mcp++
		}
		if len(h.Routes) > 0 {
			nested = append(nested, h.Routes)
		}
	}
	return mcp, nested
}
