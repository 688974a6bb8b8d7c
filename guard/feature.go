package guard

import (
	"errors"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featurefile"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/keys"
)

func init() {
	caddy.RegisterModule(Feature{})
	featurefile.Register("concurrency", featurefile.Subdirective{
		Read:  readCaddyfile,
		Words: map[string][]string{"concurrency": {"max", "queue", "queue_timeout", "cancel_grace", "key", "methods"}},
	})
}

// Order is where the guard runs among the features (feature.Parts): it is
// the entry phase's only built-in admitter.
const Order = -60

// Feature is the concurrency guard as a feature of the mcp handler: the
// module http.handlers.mcp.features.concurrency, configured by Config.
//
//	concurrency [<name>] {
//		max           <n>                 # in flight, required
//		queue         <n>                 # waiting, default 0
//		queue_timeout <duration>          # default 10s
//		cancel_grace  <duration>          # places kept after the client left, default 5s
//		key           <template>          # one guard per value; default one guard
//		methods       <method...>         # default tools/call
//	}
type Feature struct {
	Config
	guard *Guard
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".concurrency",
		New: func() caddy.Module { return new(Feature) },
	}
}

// Provision registers the guard's metrics with the config's registry.
func (f *Feature) Provision(ctx caddy.Context) error {
	return promreg.Register(ctx, append(Collectors(), keys.Collectors()...)...)
}

// Validate checks the settings.
func (f *Feature) Validate() error { return f.Config.Validate() }

// Parts takes the guard's places, from those that survive reloads, and
// plugs the guard into the entry phase.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	if strings.Contains(f.Key, "{http.mcp.auth.") && !h.VerifiesPrincipal() {
		return feature.Parts{}, fmt.Errorf("key %q reads the verified principal, and no authorization verifies one: configure authorization", f.Key)
	}
	g, err := New(&f.Config, h, h.Logger())
	if err != nil {
		return feature.Parts{}, err
	}
	f.guard = g
	parts := feature.Parts{Order: Order, Entry: g, Status: func() any { return g.Status(h.LogKey()) }}
	if k := g.Key(); k != nil {
		parts.Inputs = k.Inputs
	}
	return parts, nil
}

// Cleanup lets the places go, unless another config uses them.
func (f *Feature) Cleanup() error {
	if f.guard != nil {
		f.guard.Release()
	}
	return nil
}

// readCaddyfile reads the concurrency subdirective.
func readCaddyfile(d *caddyfile.Dispenser, a *featurefile.Adaptation) error {
	block := featurefile.At(d)
	c := &a.Feature("concurrency", func() any { return new(Feature) }).(*Feature).Config
	if d.NextArg() {
		c.Name = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := featurefile.Once(d, "concurrency", seen); err != nil {
			return err
		}
		if err := readSetting(d, c); err != nil {
			return err
		}
	}
	if c.Max == 0 {
		return featurefile.ErrAt(block, errors.New("concurrency: max is required (e.g. max 10)"))
	}
	if err := c.Validate(); err != nil {
		return featurefile.ErrAt(block, fmt.Errorf("concurrency: %w", err))
	}
	if c.Name != "" {
		return a.Share("concurrency", c.Name, block, c)
	}
	return nil
}

func readSetting(d *caddyfile.Dispenser, c *Config) error {
	var err error
	switch sub := d.Val(); sub {
	case "max":
		c.Max, err = featurefile.PositiveInt(d)
	case "queue":
		c.Queue, err = featurefile.NonNegativeInt(d)
	case "queue_timeout":
		c.QueueTimeout, err = featurefile.PositiveDuration(d)
	case "cancel_grace":
		c.CancelGrace, err = featurefile.PositiveDuration(d)
	case "key":
		c.Key, err = featurefile.KeyTemplate(d, "concurrency")
	case "methods":
		c.Methods, err = featurefile.Methods(d, "concurrency")
	default:
		return featurefile.Unrecognized(d, "concurrency", sub)
	}
	return err
}

// Interface guards.
var (
	_ caddy.Provisioner  = (*Feature)(nil)
	_ caddy.Validator    = (*Feature)(nil)
	_ caddy.CleanerUpper = (*Feature)(nil)
	_ feature.Plugin     = (*Feature)(nil)
)
