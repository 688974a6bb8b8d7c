// Package federation puts several MCP servers behind one endpoint: the
// feature http.handlers.mcp.features.federation. Each server is reached
// through a Caddy route of its own (its reverse_proxy: load balancing,
// health checks, TLS, headers), named in the site's mcp block.
//
// The client sees one server. Its initialize opens a session with every
// server at once, in parallel, and the servers' own session ids are
// sealed into the one session id the client holds (session.go), so that
// any node with the same keys serves it. Lists are asked of every server
// in parallel, each within its deadline, and merged (lists.go); a name
// keeps its bare form unless two servers give it, and then the later
// server's is prefixed with its name (names.go). A call is routed by its
// name, a resource by its URI (route.go), and what the model is told when
// a name is unknown, ambiguous or its server not connected is in
// words.go. docs/federation.md is the user's view of all of it.
package federation

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/session"
)

func init() {
	caddy.RegisterModule(Feature{})
}

// Order is where federation runs among the features: its session phase
// opens the client's session after no other (sessions cannot be combined
// with it), before the rate limits, so that every later feature sees the
// request as the server it goes to.
const Order = -79

// Defaults of the settings.
const (
	DefaultSeparator   = "__"
	DefaultListTimeout = 5 * time.Second
	DefaultMaxList     = 4 << 20
	DefaultMaxItems    = 5000
	DefaultPageSize    = 1000
)

// Feature is federation as a feature of the mcp handler.
//
//	server <name> {
//		<directives>           # reverse_proxy and anything a route holds
//	}
//	federation {
//		separator      <text>                  # default __
//		list_timeout   <duration>              # default 5s
//		max_list_size  <size>                  # per server and list, default 4MiB
//		max_list_items <n>                     # per server and list, default 5000
//		page_size      <n>                     # default 1000
//		rename         <server> <name> <as>    # advertise a tool or prompt as <as>
//		pins           <lockfile>              # keep the tool names it records
//		secret         <secret...>             # seals session ids; default keys in storage
//		session_ttl    <duration>              # default 24h
//	}
type Feature struct {
	// Servers are the MCP servers behind the endpoint, in order of
	// precedence: when two give one name, the first keeps it bare and
	// the later is prefixed. A server added later goes last, so that it
	// renames nothing clients know.
	Servers []Server `json:"servers"`
	// Separator joins a server's name and a tool's in a prefixed name.
	// Default: "__".
	Separator string `json:"separator,omitempty"`
	// ListTimeout bounds how long a merged list waits for each server.
	// Default: 5s.
	ListTimeout caddy.Duration `json:"list_timeout,omitempty"`
	// MaxListSize bounds the bytes read of one server's answers to one
	// list (every page). Past it, that server's entries are left out.
	// Default: 4 MiB.
	MaxListSize int64 `json:"max_list_size,omitempty"`
	// MaxListItems bounds the entries read of one server's list. Past
	// it, that server's entries are left out. Default: 5000.
	MaxListItems int `json:"max_list_items,omitempty"`
	// PageSize is the most entries of a merged list the client gets per
	// page. Default: 1000.
	PageSize int `json:"page_size,omitempty"`
	// Pins is a lockfile of the federated endpoint (caddy mcp-lock), whose
	// tool names are kept with the servers it records, whatever the order
	// of the servers (names.go). Default: none, the order decides.
	Pins string `json:"pins,omitempty"`
	// Secrets seal the session ids clients hold, as sessions' do; default:
	// keys kept in Caddy's storage, rotated, shared by the nodes that
	// share it.
	Secrets []string `json:"secrets,omitempty"`
	// SessionTTL is how long a session id opens. Default: 24h.
	SessionTTL caddy.Duration `json:"session_ttl,omitempty"`

	ctx  caddy.Context
	pins pins
	fed  *federation
}

// Server is one MCP server behind the endpoint.
type Server struct {
	// Name names it: in prefixed names, logs, metrics and errors.
	Name string `json:"name"`
	// Routes reach it: a Caddy route list holding its reverse_proxy.
	Routes caddyhttp.RouteList `json:"routes"`
	// Rename advertises a tool or prompt of the server under another
	// name: the server's name → the name clients see.
	Rename map[string]string `json:"rename,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".federation",
		New: func() caddy.Module { return new(Feature) },
	}
}

// serverName is what a server's name may hold: it is written into tool
// names, which clients restrict to these characters.
var serverName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Provision reads the pins, and readies the servers' routes.
func (f *Feature) Provision(ctx caddy.Context) error {
	f.ctx = ctx
	if f.Pins != "" {
		var err error
		if f.pins, err = loadPins(f.Pins); err != nil {
			return fmt.Errorf("federation: pins: %w", err)
		}
	}
	for i := range f.Servers {
		s := &f.Servers[i]
		if err := s.Routes.Provision(ctx); err != nil {
			return fmt.Errorf("server %q: %w", s.Name, err)
		}
	}
	return promreg.Register(ctx, collectors()...)
}

// Validate checks the settings.
func (f *Feature) Validate() error {
	if len(f.Servers) == 0 {
		return errors.New("federation: no server: name each in a server block")
	}
	sep := cmp.Or(f.Separator, DefaultSeparator)
	if len(sep) > 8 || strings.ContainsAny(sep, " \t\r\n") {
		return fmt.Errorf("federation: separator %q: want 1 to 8 characters, no spaces", sep)
	}
	seen := map[string]bool{}
	for _, s := range f.Servers {
		switch {
		case !serverName.MatchString(s.Name):
			return fmt.Errorf("federation: server name %q: want 1 to 32 letters, digits, _ or -", feature.Clip(s.Name))
		case seen[s.Name]:
			return fmt.Errorf("federation: server %q is named twice", s.Name)
		case strings.Contains(s.Name, sep):
			return fmt.Errorf("federation: server name %q holds the separator %q: its prefixed names would read two ways", s.Name, sep)
		case len(s.Routes) == 0:
			return fmt.Errorf("federation: server %q has no route: give it a reverse_proxy", s.Name)
		}
		seen[s.Name] = true
		as := map[string]string{}
		for name, to := range s.Rename {
			if to == "" || name == "" {
				return fmt.Errorf("federation: server %q: a rename needs a name and what to advertise it as", s.Name)
			}
			if prev, dup := as[to]; dup {
				return fmt.Errorf("federation: server %q renames both %q and %q to %q", s.Name, prev, name, to)
			}
			as[to] = name
		}
	}
	if f.ListTimeout < 0 || f.MaxListSize < 0 || f.MaxListItems < 0 || f.PageSize < 0 {
		return errors.New("federation: list_timeout, max_list_size, max_list_items and page_size must be positive")
	}
	if d := time.Duration(f.SessionTTL); d < 0 || d > session.MaxTTL {
		return fmt.Errorf("federation: session_ttl %s: want a positive duration of 30 days at most", d)
	}
	return nil
}

// Parts sets the federation up: its session phase (the session opened,
// the request's server chosen and given its own session id), the check
// that refuses what no server can take, the router and the rewriter, the
// answerer of what every server is asked, and the hook on each answer.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	fed, err := f.build(h)
	if err != nil {
		return feature.Parts{}, err
	}
	f.fed = fed
	return feature.Parts{
		Order: Order, Session: fed, Check: fed, Router: fed, Rewriter: fed, Answerer: fed, Observer: fed,
		Status: func() any { return fed.status() },
	}, nil
}

// build makes the federation f configures.
func (f *Feature) build(h feature.Host) (*federation, error) {
	fed := &federation{
		sep:         cmp.Or(f.Separator, DefaultSeparator),
		pins:        f.pins,
		listTimeout: cmp.Or(time.Duration(f.ListTimeout), DefaultListTimeout),
		maxList:     cmp.Or(f.MaxListSize, DefaultMaxList),
		maxItems:    cmp.Or(f.MaxListItems, DefaultMaxItems),
		pageSize:    cmp.Or(f.PageSize, DefaultPageSize),
		ttl:         cmp.Or(time.Duration(f.SessionTTL), session.DefaultTTL),
		bound:       h.VerifiesPrincipal(),
		retryAfter:  h.RetryAfter(),
		logger:      h.Logger(),
		byName:      map[string]*server{},
		now:         time.Now,
		remap:       newRemap(maxRemapped),
	}
	fed.audience = audienceOf(h)
	fed.cursorKey = make([]byte, 32)
	_, _ = rand.Read(fed.cursorKey)
	for i := range f.Servers {
		c := &f.Servers[i]
		if err := checkCredentials(c, h.VerifiesPrincipal()); err != nil {
			return nil, err
		}
		s := &server{name: c.Name, index: i, rename: c.Rename, route: serverRoute(c.Name, c.Routes.Compile(unanswered(c.Name)), h.VerifiesPrincipal())}
		fed.servers = append(fed.servers, s)
		fed.byName[s.name] = s
	}
	if err := fed.keys(f.ctx, f.Secrets); err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	return fed, nil
}

// audienceOf is what the session tokens of h's site name: "federation"
// and the site's host name, without its scheme or port, so that the nodes
// of a fleet (one name, any port) open each other's tokens and another
// site's do not.
func audienceOf(h feature.Host) string {
	origin, err := h.Origin()
	if err != nil {
		return tokenUpstream
	}
	u, err := url.Parse(origin)
	if err != nil || u.Hostname() == "" {
		return tokenUpstream
	}
	return tokenUpstream + " " + u.Hostname()
}

// unanswered ends a server's route that did not answer: its routes matched
// nothing, or held no reverse_proxy.
func unanswered(name string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return caddyhttp.Error(502, fmt.Errorf("the routes of server %q did not answer: give them a reverse_proxy", name))
	})
}

// Interface guards.
var (
	_ caddy.Provisioner = (*Feature)(nil)
	_ caddy.Validator   = (*Feature)(nil)
	_ feature.Plugin    = (*Feature)(nil)
)
