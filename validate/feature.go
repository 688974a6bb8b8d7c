package validate

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featurefile"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

func init() {
	caddy.RegisterModule(Module{})
}

// Module is validate as a feature of the mcp handler: the module
// http.handlers.mcp.features.validate. It checks each tools/call's
// arguments against the inputSchema the upstream gave the tool in its last
// tools/list answer (learned as it passes through, per endpoint and
// authorization scope). A call that breaks it is answered by the gateway
// with a <validation_error> result the model can correct itself from,
// without reaching the upstream; a call to a tool a complete list does not
// hold gets UNKNOWN_ACTION with the nearest names. Rate limits count the
// call first; a refused call takes no guard place. A call whose tool has no
// known schema passes.
//
//	validate {
//		max_catalog_size <size>           # memory of the tools learned, default 128MiB
//	}
type Module struct {
	// MaxCatalogSize bounds, in bytes, the memory of the tools learned
	// from tools/list answers (which validate, contract, tools and
	// results read): the lists, each kept once however many callers were
	// given it, and their compiled schemas. Past it, the lists no call
	// has used go first, then the least recently used, and their calls
	// pass unchecked until they are listed again. The process keeps one
	// catalog, bounded by the largest max_catalog_size of the config.
	// Default: 128 MiB.
	MaxCatalogSize int64 `json:"max_catalog_size,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".validate",
		New: func() caddy.Module { return new(Module) },
	}
}

// Provision registers validate's metrics with the config's registry.
func (m *Module) Provision(ctx caddy.Context) error {
	return promreg.Register(ctx, Collectors()...)
}

// Validate checks the settings.
func (m *Module) Validate() error {
	if m.MaxCatalogSize < 0 {
		return fmt.Errorf("max_catalog_size: %d is negative", m.MaxCatalogSize)
	}
	return nil
}

// Parts turns on the checks of the handler's learned tools, which are
// plugged on their own (Shared).
func (m *Module) Parts(h feature.Host) (feature.Parts, error) {
	f, err := Shared(h)
	if err != nil {
		return feature.Parts{}, err
	}
	f.CheckArguments(m.MaxCatalogSize)
	return feature.Parts{Order: Order}, nil
}

// UnmarshalCaddyfile reads validate [{ max_catalog_size <size> }].
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the subdirective's name
	if err := featurefile.NoArgs(d); err != nil {
		return err
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_catalog_size":
			if m.MaxCatalogSize != 0 {
				return d.Errf("max_catalog_size given twice")
			}
			var err error
			if m.MaxCatalogSize, err = featurefile.Size(d); err != nil {
				return err
			}
		default:
			return featurefile.Unrecognized(d, "validate", d.Val(), "max_catalog_size")
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner     = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
	_ feature.Plugin        = (*Module)(nil)
)
