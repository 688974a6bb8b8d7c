package limits

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/keys"
)

func init() {
	caddy.RegisterModule(Feature{})
}

// Order is where the rate limits run among the features (feature.Parts):
// they are the admission phase's only built-in admitter.
const Order = -70

// Feature is the rate limits as a feature of the mcp handler: the module
// http.handlers.mcp.features.rate_limits.
type Feature struct {
	// Limits are token-bucket limits by name. A message is admitted only
	// if every limit that applies to it has tokens; a message refused by
	// one limit takes no token from any other. A name identifies the
	// buckets across config reloads and across sites: handlers that use
	// the same name and key template share buckets, and must give the
	// name the same settings (a config where two handlers disagree is
	// refused).
	Limits map[string]*Config `json:"limits,omitempty"`

	// Store keeps the buckets somewhere every node of a fleet shares, a
	// module of the http.handlers.mcp.stores namespace named by its
	// "backend" (redis). Default: each node keeps its own, in memory.
	StoreRaw json.RawMessage `json:"store,omitempty" caddy:"namespace=http.handlers.mcp.stores inline_key=backend"`

	shared SharedStore
	limits Limits
}

// SharedStore is a module of the http.handlers.mcp.stores namespace: where
// the buckets live when every node of a fleet must share them (package
// redisstore is one).
type SharedStore interface {
	Shared
	// Status describes the store and its health, for /mcp/status.
	Status() any
}

// FeatureStatus is the rate limits in /mcp/status.
type FeatureStatus struct {
	// Store is the shared store of the buckets and its health; absent
	// when each node keeps its own.
	Store  any      `json:"store,omitempty"`
	Limits []Status `json:"limits"`
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".rate_limits",
		New: func() caddy.Module { return new(Feature) },
	}
}

// Provision registers the limits' metrics and loads the shared store.
func (f *Feature) Provision(ctx caddy.Context) error {
	if err := promreg.Register(ctx, append(Collectors(), keys.Collectors()...)...); err != nil {
		return err
	}
	if f.StoreRaw == nil {
		return nil
	}
	mod, err := ctx.LoadModule(f, "StoreRaw")
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	shared, ok := mod.(SharedStore)
	if !ok {
		return fmt.Errorf("store: module %T is not a rate-limit store", mod)
	}
	f.shared = shared
	return nil
}

// Validate checks each limit's settings.
func (f *Feature) Validate() error {
	for _, name := range f.names() {
		if f.Limits[name] == nil {
			return fmt.Errorf("rate_limit %q: no settings", name)
		}
		if err := f.Limits[name].Validate(); err != nil {
			return fmt.Errorf("rate_limit %q: %w", name, err)
		}
	}
	return nil
}

func (f *Feature) names() []string {
	names := make([]string, 0, len(f.Limits))
	for name := range f.Limits {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Parts takes each limit's buckets, from those that survive reloads, and
// plugs the limits into the admission phase.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	var inputs feature.Inputs
	for _, name := range f.names() {
		cfg := f.Limits[name]
		if strings.Contains(cfg.Key, "{http.mcp.auth.") && !h.VerifiesPrincipal() {
			return feature.Parts{}, fmt.Errorf("rate_limit %q: key %q reads the verified principal, and no authorization verifies one: configure authorization", name, cfg.Key)
		}
		var shared Shared
		if f.shared != nil {
			shared = f.shared
		}
		l, err := New(name, cfg, shared, h.Logger())
		if err != nil {
			return feature.Parts{}, fmt.Errorf("rate_limit %q: %w", name, err)
		}
		f.limits = append(f.limits, l)
		if err := h.Declare("rate_limit", name, l.Settings()); err != nil {
			return feature.Parts{}, err
		}
		inputs.Add(l.Key().Inputs)
	}
	parts := feature.Parts{Order: Order, Inputs: inputs, Status: f.status}
	if len(f.limits) > 0 {
		parts.Admission = f.limits
	}
	return parts, nil
}

func (f *Feature) status() any {
	s := FeatureStatus{Limits: make([]Status, 0, len(f.limits))}
	if f.shared != nil {
		s.Store = f.shared.Status()
	}
	for _, l := range f.limits {
		s.Limits = append(s.Limits, l.Status())
	}
	return s
}

// Cleanup lets each limit's buckets go, unless another config uses them.
func (f *Feature) Cleanup() error {
	for _, l := range f.limits {
		l.Release()
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner  = (*Feature)(nil)
	_ caddy.Validator    = (*Feature)(nil)
	_ caddy.CleanerUpper = (*Feature)(nil)
	_ feature.Plugin     = (*Feature)(nil)
)
