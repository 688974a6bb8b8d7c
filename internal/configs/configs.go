// Package configs holds what lives as long as one Caddy config: its load,
// made by the Provision of its first mcp handler and let go by the Cleanup
// of its last, with the handlers /mcp/status lists, what they must agree
// on, and what its features share.
package configs

import (
	"io"
	"slices"
	"sync"

	"github.com/caddyserver/caddy/v2"
)

// What lives as long as one config, and what outlives it.
//
// A config's own state is its load: made by the Provision of its first mcp
// handler, and let go by the Cleanup of its last. It holds the handlers
// /mcp/status lists, what they must agree on (shared.go, routes.go), and
// what its features share (feature.Host.ShareInConfig: the tool names the
// budgets' metric is labelled with, the catalog's bound). A reload
// provisions the new config before it cleans up the old one, so the new
// one starts with nothing of the old, and nothing of the old is left once
// its last handler is cleaned up.
//
// What must survive a reload belongs to the process, each in one place,
// taken in Provision and given back in Cleanup, and let go with the last
// config that uses it: a limit's buckets and a guard's places (packages
// limits and guard, by name), the tool catalog (package validate) and the
// lists compared with a lockfile (package contract), each in a
// caddy.UsagePool as reverse_proxy keeps its hosts. The metrics'
// collectors (the handler's, and each feature's) are the process's too,
// registered with each config's registry, so that counters do not reset
// at a reload.

// Registry is the loads alive of handlers of type H, in the order of their
// first handler's Provision: during a reload, the old config's before the
// new one's. Its zero value, given a Name, is ready.
type Registry[H comparable] struct {
	// Name is the handler's name in a route's JSON ({"handler": "mcp"}),
	// by which CheckRoutes knows it there; provisioned, it is an H.
	Name string

	mu    sync.Mutex
	loads []*Load[H]
}

// Load is one config's state.
type Load[H comparable] struct {
	reg *Registry[H]
	// id is the config's identity (ID).
	id any
	// joined counts the handlers provisioned (or being provisioned) and
	// not yet cleaned up; guarded by the registry's lock.
	joined int

	mu sync.Mutex
	// handlers are the handlers whose Provision ended and that are not yet
	// cleaned up, in provisioning order: the ones /mcp/status lists.
	handlers []H
	// declared are the settings given to each shared name, by kind and
	// name (Declare).
	declared map[string]string
	// unnamed counts the unnamed guards provisioned so far, by settings.
	unnamed map[string]int
	// routesChecked: the config's routes were checked for duplicate
	// handlers.
	routesChecked bool
	// shared are the values the config's features share
	// (feature.Host.ShareInConfig), in the order first asked for.
	shared []sharedValue
}

type sharedValue struct {
	key   string
	value any
}

// ID identifies the config a module is provisioned for: the app at the
// root of its ancestry (the http app, a new one per config), or, for a
// handler provisioned on its own, its context.
func ID(ctx caddy.Context) any {
	if mods := ctx.Modules(); len(mods) > 0 {
		return mods[0]
	}
	return ctx.Context
}

// Join registers a handler with the load of config id, made by the first
// handler to join; Leave undoes it.
func (r *Registry[H]) Join(id any) *Load[H] {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.loads, func(l *Load[H]) bool { return l.id == id })
	if i < 0 {
		i = len(r.loads)
		r.loads = append(r.loads, &Load[H]{
			reg: r, id: id, declared: make(map[string]string), unnamed: make(map[string]int),
		})
	}
	l := r.loads[i]
	l.joined++
	return l
}

// Leave undoes Join, when a handler is cleaned up: the last handler of the
// config to leave lets its load go.
func (l *Load[H]) Leave() {
	r := l.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.joined--; l.joined <= 0 {
		r.loads = slices.DeleteFunc(r.loads, func(o *Load[H]) bool { return o == l })
		l.closeShared()
	}
}

// AddLive lists h, whose Provision ended, in /mcp/status.
func (l *Load[H]) AddLive(h H) {
	l.mu.Lock()
	l.handlers = append(l.handlers, h)
	l.mu.Unlock()
}

// RemoveLive takes h off /mcp/status, when it is cleaned up.
func (l *Load[H]) RemoveLive(h H) {
	l.mu.Lock()
	l.handlers = slices.DeleteFunc(l.handlers, func(o H) bool { return o == h })
	l.mu.Unlock()
}

// Live are every live config's handlers, config by config, each in
// provisioning order.
func (r *Registry[H]) Live() []H {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []H
	for _, l := range r.loads {
		l.mu.Lock()
		all = append(all, l.handlers...)
		l.mu.Unlock()
	}
	return all
}

// IDs are the identities of the live configs, in the registry's order.
func (r *Registry[H]) IDs() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]any, len(r.loads))
	for i, l := range r.loads {
		ids[i] = l.id
	}
	return ids
}

// Share is the config's value of key, made by make on first use
// (feature.Host.ShareInConfig).
func (l *Load[H]) Share(key string, make func() (any, error)) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.shared {
		if s.key == key {
			return s.value, nil
		}
	}
	v, err := make()
	if err != nil {
		return nil, err
	}
	l.shared = append(l.shared, sharedValue{key, v})
	return v, nil
}

// closeShared closes what the config's features shared, once its last
// handler is gone.
func (l *Load[H]) closeShared() {
	l.mu.Lock()
	shared := l.shared
	l.shared = nil
	l.mu.Unlock()
	for _, s := range shared {
		if c, ok := s.value.(io.Closer); ok {
			_ = c.Close()
		}
	}
}
