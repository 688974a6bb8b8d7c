package federation

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// testServer is a server of a federation built in the test, named name,
// reached through route (nil: one that answers nothing).
func testServer(name string, route caddyhttp.Handler, rename map[string]string) *server {
	if route == nil {
		route = unanswered(name)
	}
	return &server{name: name, rename: rename, route: route}
}

// testFederation is a federation of servers, in their order, with the
// default bounds and separator, a fixed cursor key and clock.
func testFederation(servers ...*server) *federation {
	f := &federation{
		byName:      map[string]*server{},
		sep:         DefaultSeparator,
		listTimeout: DefaultListTimeout,
		maxList:     DefaultMaxList,
		maxItems:    DefaultMaxItems,
		pageSize:    DefaultPageSize,
		cursorKey:   []byte("a cursor key of thirty-two bytes"),
		logger:      zap.NewNop(),
		now:         func() time.Time { return time.Unix(1_800_000_000, 0) },
		remap:       newRemap(16),
		audience:    tokenUpstream,
	}
	for i, s := range servers {
		s.index = i
		f.servers = append(f.servers, s)
		f.byName[s.name] = s
	}
	return f
}

// entriesOf are the entries of s named names, as its list gives them.
func entriesOf(s *server, names ...string) []*entry {
	out := make([]*entry, 0, len(names))
	for _, n := range names {
		raw, _ := json.Marshal(map[string]string{"name": n})
		out = append(out, &entry{server: s, own: n, raw: raw})
	}
	return out
}

// handlerOf is an http handler function as a route.
func handlerOf(h func(w http.ResponseWriter, r *http.Request) error) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(h)
}
