// Package featurefile is how a feature of the mcp handler reads its words
// in a Caddyfile: a feature registers its subdirectives of the mcp block
// (Register), as Caddy's httpcaddyfile registers directives, and reads
// each with the helpers here, which check values with the feature's own
// rules at the line they are on.
//
// A feature that is one block of its own may instead implement
// caddyfile.Unmarshaler, as reverse_proxy's transports do: its module's
// name is then its subdirective. Register is for what one block cannot
// say: a subdirective given several times (rate_limit), several
// subdirectives that configure one feature (store and rate_limit), and
// names that must agree across the sites of the Caddyfile.
package featurefile

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Subdirective reads one subdirective of the mcp block, the dispenser on
// its name, into the configuration of the features it configures
// (Adaptation.Feature).
type Subdirective struct {
	// Read reads it.
	Read func(d *caddyfile.Dispenser, a *Adaptation) error
	// Repeats: it may be given more than once in one mcp block.
	Repeats bool
	// Words are the subdirectives of its block, and of the blocks within
	// it by their names, for "did you mean" (Unrecognized).
	Words map[string][]string
}

var registry struct {
	sync.Mutex
	subdirectives map[string]Subdirective
}

// Register makes name a subdirective of the mcp block. It is called from
// the feature package's init; a name registered twice panics, as Caddy's
// modules do.
func Register(name string, s Subdirective) {
	registry.Lock()
	defer registry.Unlock()
	if registry.subdirectives == nil {
		registry.subdirectives = make(map[string]Subdirective)
	}
	if _, dup := registry.subdirectives[name]; dup {
		panic("featurefile: subdirective " + name + " registered twice")
	}
	registry.subdirectives[name] = s
}

// Lookup is the subdirective registered under name.
func Lookup(name string) (Subdirective, bool) {
	registry.Lock()
	defer registry.Unlock()
	s, ok := registry.subdirectives[name]
	return s, ok
}

// Names are the registered subdirectives' names, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.subdirectives))
	for n := range registry.subdirectives {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// words are the subdirectives of a block named block, from every
// registration.
func words(block string) []string {
	registry.Lock()
	defer registry.Unlock()
	var all []string
	for _, s := range registry.subdirectives {
		all = append(all, s.Words[block]...)
	}
	return all
}

// Adaptation is what adapting one mcp block shares: the configuration of
// each feature it configures, and, with the rest of the Caddyfile, the
// shared names and the warnings.
type Adaptation struct {
	names    map[string]place
	warn     func(caddyconfig.Warning)
	features map[string]any
	routes   func(d *caddyfile.Dispenser) (json.RawMessage, error)
}

// place is where a shared name was configured, and how.
type place struct {
	at       string
	settings string
}

// NewAdaptation starts adapting an mcp block. state is the adapter's
// state, shared by every block of the Caddyfile (nil: this block's
// alone); warn adds a warning to the adapter's.
func NewAdaptation(state map[string]any, warn func(caddyconfig.Warning)) *Adaptation {
	const key = "mcp.shared_names"
	names, ok := state[key].(map[string]place)
	if !ok {
		names = make(map[string]place)
		if state != nil {
			state[key] = names
		}
	}
	return &Adaptation{names: names, warn: warn, features: make(map[string]any)}
}

// Feature is the configuration of the feature named name that the block
// builds, made by make the first time a subdirective asks for it.
func (a *Adaptation) Feature(name string, make func() any) any {
	f, ok := a.features[name]
	if !ok {
		f = make()
		a.features[name] = f
	}
	return f
}

// Features are the configurations built, by feature name, as JSON.
func (a *Adaptation) Features() (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(a.features))
	for name, f := range a.features {
		if raw, ok := f.(json.RawMessage); ok {
			out[name] = raw
			continue
		}
		raw, err := json.Marshal(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = raw
	}
	return out, nil
}

// SetRoutes gives the adaptation the reader of a block of directives as
// Caddy routes (the Caddyfile adapter's own, which knows every directive
// of the build): Routes reads with it.
func (a *Adaptation) SetRoutes(read func(d *caddyfile.Dispenser) (json.RawMessage, error)) {
	a.routes = read
}

// Routes reads the block of the subdirective the dispenser is on as the
// directives of a site (reverse_proxy and its matchers, headers...), into
// the JSON of a list of Caddy routes: a feature's own upstream route. The
// subdirective's values are read before, and left out.
func (a *Adaptation) Routes(d *caddyfile.Dispenser) (json.RawMessage, error) {
	if a.routes == nil {
		return nil, d.Errf("%s: a block of directives is read only by the Caddyfile adapter", d.Val())
	}
	return a.routes(d)
}

// Warn adds a warning to the adapter's.
func (a *Adaptation) Warn(w caddyconfig.Warning) { a.warn(w) }

// Share records that the shared state of kind and name is configured at
// (At), with settings, and refuses it when the name was configured
// differently elsewhere in the Caddyfile: a name shares its state.
func (a *Adaptation) Share(kind, name, at string, settings any) error {
	b, err := json.Marshal(settings)
	if err != nil {
		return err
	}
	k := kind + " " + name
	prev, ok := a.names[k]
	if !ok {
		a.names[k] = place{at: at, settings: string(b)}
		return nil
	}
	if prev.settings != string(b) {
		return fmt.Errorf("%s %q is configured at %s and, differently, at %s: a name shares its state, so every use of it must give the same settings; rename one to keep them apart", kind, name, prev.at, at)
	}
	return nil
}

// At is where the dispenser's current token is, as Caddy writes it.
func At(d *caddyfile.Dispenser) string {
	return d.File() + ":" + strconv.Itoa(d.Line())
}

// ErrAt is an error at a place, worded as the dispenser words its own.
func ErrAt(place string, err error) error {
	return fmt.Errorf("%w, at %s", err, place)
}
