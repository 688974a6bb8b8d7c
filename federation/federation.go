package federation

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/session"
)

// federation is a handler's federation at work: its servers, the keys of
// its sessions, and what it learned of the servers' names.
type federation struct {
	servers []*server
	byName  map[string]*server

	sep         string
	pins        pins
	listTimeout time.Duration
	maxList     int64
	maxItems    int
	pageSize    int
	cursorKey   []byte

	// audience is what a session token of this site names as its
	// upstream: "federation", and the site's host name.
	audience string
	ring     func() *session.Keyring
	ttl      time.Duration
	bound    bool
	// remap is the sessions this node opened for clients' tokens.
	remap      *remap
	connecting sync.Map
	// refused are the refusals that ended connections (credential.go).
	refused refusedConnects

	// names is what the last lists of tools and prompts made of the
	// servers' names (names.go), nil before any list.
	names     atomic.Pointer[catalog]
	resources atomic.Pointer[located]
	relists   singleflight.Group
	// changed counts the list_changed notifications seen; a catalog made
	// before the last one is stale.
	changed atomic.Uint64

	// ids numbers the gateway's own requests to the servers.
	ids atomic.Uint64

	retryAfter time.Duration
	logger     *zap.Logger
	now        func() time.Time
}

// server is one server behind the endpoint.
type server struct {
	name   string
	index  int
	rename map[string]string
	route  caddyhttp.Handler
}

// Upstream is the route of the server named name.
func (f *federation) Upstream(name string) feature.Upstream {
	if s, ok := f.byName[name]; ok {
		return s.route
	}
	return nil
}

// recover ends a goroutine of the federation that panicked.
func (f *federation) recover(site string) {
	panics.Recover(f.logger, site)
}

// Status is federation's section of /mcp/status.
type Status struct {
	Servers   []string `json:"servers"`
	Tools     int      `json:"tools"`
	Prompts   int      `json:"prompts"`
	Prefixed  int      `json:"prefixed"`
	Pinned    int      `json:"pinned"`
	Remapped  int      `json:"sessions_opened_here"`
	ListedAt  string   `json:"listed_at,omitempty"`
	Separator string   `json:"separator"`
}

func (f *federation) status() *Status {
	st := &Status{Separator: f.sep, Remapped: f.remap.len(), Pinned: len(f.pins)}
	for _, s := range f.servers {
		st.Servers = append(st.Servers, s.name)
	}
	if c := f.names.Load(); c != nil {
		st.Tools, st.Prompts, st.Prefixed = len(c.tools.byName), len(c.prompts.byName), c.prefixed
		st.ListedAt = c.made.UTC().Format(time.RFC3339)
	}
	return st
}
