package handler

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
// /mcp/status lists, what they must agree on (shared.go), and what its
// features share (feature.Host.ShareInConfig: the tool names the budgets'
// metric is labelled with, the catalog's bound). A reload provisions the new
// config before it cleans up the old one, so the new one starts with
// nothing of the old, and nothing of the old is left once its last handler
// is cleaned up.
//
// What must survive a reload belongs to the process, each in one place,
// taken in Provision and given back in Cleanup, and let go with the last
// config that uses it: a limit's buckets and a guard's places (packages
// limits and guard, by name), the tool catalog (package validate) and the
// lists compared with a lockfile (package contract), each in a
// caddy.UsagePool as reverse_proxy keeps its hosts. The metrics'
// collectors (metrics.go, and each feature's) are the process's too,
// registered with each config's registry, so that counters do not reset
// at a reload.

// configs are the loads alive, in the order of their first handler's
// Provision: during a reload, the old config's before the new one's.
var configs struct {
	sync.Mutex
	loads []*load
}

// load is one config's state.
type load struct {
	// id is the config's identity (loadOf).
	id any
	// joined counts the handlers provisioned (or being provisioned) and
	// not yet cleaned up; guarded by configs' lock.
	joined int

	mu sync.Mutex
	// handlers are the handlers whose Provision ended and that are not yet
	// cleaned up, in provisioning order: the ones /mcp/status lists.
	handlers []*Handler
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

// loadOf identifies the config a module is provisioned for: the app at the
// root of its ancestry (the http app, a new one per config), or, for a
// handler provisioned on its own, its context.
func loadOf(ctx caddy.Context) any {
	if mods := ctx.Modules(); len(mods) > 0 {
		return mods[0]
	}
	return ctx.Context
}

// joinLoad registers a handler with the load of config id, made by the
// first handler to join; leave undoes it.
func joinLoad(id any) *load {
	configs.Lock()
	defer configs.Unlock()
	i := slices.IndexFunc(configs.loads, func(l *load) bool { return l.id == id })
	if i < 0 {
		i = len(configs.loads)
		configs.loads = append(configs.loads, &load{
			id: id, declared: make(map[string]string), unnamed: make(map[string]int),
		})
	}
	l := configs.loads[i]
	l.joined++
	return l
}

// leave undoes joinLoad, when a handler is cleaned up: the last handler of
// the config to leave lets its load go.
func (l *load) leave() {
	configs.Lock()
	defer configs.Unlock()
	if l.joined--; l.joined <= 0 {
		configs.loads = slices.DeleteFunc(configs.loads, func(o *load) bool { return o == l })
		l.closeShared()
	}
}

// addLive lists h, whose Provision ended, in /mcp/status.
func (l *load) addLive(h *Handler) {
	l.mu.Lock()
	l.handlers = append(l.handlers, h)
	l.mu.Unlock()
}

// removeLive takes h off /mcp/status, when it is cleaned up.
func (l *load) removeLive(h *Handler) {
	l.mu.Lock()
	l.handlers = slices.DeleteFunc(l.handlers, func(o *Handler) bool { return o == h })
	l.mu.Unlock()
}

// liveHandlers are every live config's handlers, config by config, each in
// provisioning order.
func liveHandlers() []*Handler {
	configs.Lock()
	defer configs.Unlock()
	var all []*Handler
	for _, l := range configs.loads {
		l.mu.Lock()
		all = append(all, l.handlers...)
		l.mu.Unlock()
	}
	return all
}

// share is the config's value of key, made by make on first use
// (feature.Host.ShareInConfig).
func (l *load) share(key string, make func() (any, error)) (any, error) {
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
func (l *load) closeShared() {
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
