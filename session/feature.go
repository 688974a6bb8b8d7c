package session

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featurefile"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

func init() {
	caddy.RegisterModule(Feature{})
	featurefile.Register("sessions", featurefile.Subdirective{
		Read:  readCaddyfile,
		Words: map[string][]string{"sessions": {"secret", "ttl", "bind"}},
	})
}

// Order is where the sessions run among the features (feature.Parts):
// they are the session phase's only built-in admitter.
const Order = -80

// Feature is the sessions as a feature of the mcp handler: the module
// http.handlers.mcp.features.sessions, configured by Config.
//
//	sessions {
//		secret <secret...>                # the first seals, all open; default: keys in Caddy's storage
//		ttl    <duration>                 # default 24h
//		bind   <placeholder template>     # the principal a session belongs to; default: the verified one, if any
//	}
type Feature struct {
	Config
	ctx  caddy.Context
	pins *Pins
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".sessions",
		New: func() caddy.Module { return new(Feature) },
	}
}

// Provision registers the sessions' metrics with the config's registry,
// and keeps ctx, whose storage holds the session keys.
func (f *Feature) Provision(ctx caddy.Context) error {
	f.ctx = ctx
	return promreg.Register(ctx, Collectors()...)
}

// Validate checks the settings.
func (f *Feature) Validate() error { return f.Config.Validate() }

// Parts sets up the pins, and plugs them into the session phase. A
// session is bound to the verified principal, when a feature verifies
// one and no bind is given: a session then works only for the principal
// that opened it.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	cfg := f.Config
	switch {
	case cfg.Bind == "" && h.VerifiesPrincipal():
		cfg.Bind = feature.PrincipalTemplate
	case strings.Contains(cfg.Bind, "{http.mcp.auth.") && !h.VerifiesPrincipal():
		return feature.Parts{}, fmt.Errorf("bind %q reads the verified principal, and no authorization verifies one: configure authorization", cfg.Bind)
	}
	pins, err := New(f.ctx, &cfg, h.RetryAfter(), h.Logger())
	if err != nil {
		return feature.Parts{}, err
	}
	f.pins = pins
	return feature.Parts{Order: Order, Session: pins, Status: func() any { return pins.Status() }}, nil
}

// Cleanup lets go of what the pins took.
func (f *Feature) Cleanup() error {
	if f.pins != nil {
		f.pins.Release()
	}
	return nil
}

// readCaddyfile reads the sessions subdirective. A first secret that
// expands to nothing here is warned of, at its line: Caddy refuses the
// config wherever it is empty, and a config may be adapted where it does
// not run.
func readCaddyfile(d *caddyfile.Dispenser, a *featurefile.Adaptation) error {
	block := featurefile.At(d)
	if d.NextArg() {
		return d.ArgErr()
	}
	s := &a.Feature("sessions", func() any { return new(Feature) }).(*Feature).Config
	var secretAt *caddyconfig.Warning
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := featurefile.Once(d, "sessions", seen); err != nil {
			return err
		}
		var err error
		switch sub := d.Val(); sub {
		case "secret":
			secretAt = &caddyconfig.Warning{File: d.File(), Line: d.Line(), Directive: "mcp"}
			s.Secrets, err = featurefile.ManyArgs(d)
		case "ttl":
			s.TTL, err = featurefile.PositiveDuration(d)
		case "bind":
			s.Bind, err = readBind(d)
		default:
			return featurefile.Unrecognized(d, "sessions", sub)
		}
		if err != nil {
			return err
		}
	}
	if err := s.Validate(); err != nil {
		return featurefile.ErrAt(block, fmt.Errorf("sessions: %w", err))
	}
	if err := s.CheckSealingSecret(); err != nil && secretAt != nil {
		secretAt.Message = fmt.Sprintf("sessions: %v. Caddy refuses this config where it is empty", err)
		a.Warn(*secretAt)
	}
	return nil
}

// readBind reads bind, checked at its line.
func readBind(d *caddyfile.Dispenser) (string, error) {
	v, err := featurefile.OneArg(d)
	if err != nil {
		return "", err
	}
	if err := (&Config{Bind: v}).Validate(); err != nil {
		return "", d.Errf("sessions: %v", err)
	}
	return v, nil
}

// Interface guards.
var (
	_ caddy.Provisioner  = (*Feature)(nil)
	_ caddy.Validator    = (*Feature)(nil)
	_ caddy.CleanerUpper = (*Feature)(nil)
	_ feature.Plugin     = (*Feature)(nil)
)
