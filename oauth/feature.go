package oauth

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

func init() {
	caddy.RegisterModule(Feature{})
}

// Feature is authorization as a feature of the mcp handler: the module
// http.handlers.mcp.features.authorization, configured by Config. The
// gateway is then the OAuth 2.1 resource server of the MCP servers behind
// it: every request must carry a valid access token for this resource,
// and the Protected Resource Metadata that clients discover the
// authorization server from is served here.
type Feature struct {
	Config
	gate *Gate
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".authorization",
		New: func() caddy.Module { return new(Feature) },
	}
}

// Provision registers authorization's metrics with the config's registry.
func (f *Feature) Provision(ctx caddy.Context) error {
	return promreg.Register(ctx, Collectors()...)
}

// Validate checks the settings.
func (f *Feature) Validate() error { return f.Config.Validate() }

// VerifiesPrincipal: authorization verifies who each request speaks for.
func (*Feature) VerifiesPrincipal() bool { return true }

// Parts sets up the gate, holding tokens to the configured resource or
// else to the address of the site the handler serves, and plugs it into
// the identity phase, the checks (when a rule gives a tool, a prompt or a
// resource scopes of its own), the answers (which leave out what the
// caller's token lacks) and the front (the metadata).
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	if err := f.Resolve(); err != nil {
		return feature.Parts{}, err
	}
	resource, err := f.CanonicalURL(h.Origin())
	if err != nil {
		return feature.Parts{}, err
	}
	g := New(&f.Config, resource, h.Logger(), nil)
	f.gate = g
	parts := feature.Parts{
		Order: Order, AnswerOrder: AnswerOrder,
		Identity: g, Front: g, Status: func() any { return g.Status() },
	}
	if g.Governs() {
		parts.Check, parts.Responder = g, g
	}
	return parts, nil
}

// Front serves the Protected Resource Metadata (ServeMetadata).
func (g *Gate) Front(w http.ResponseWriter, r *http.Request) bool { return g.ServeMetadata(w, r) }

// Interface guards.
var (
	_ caddy.Provisioner         = (*Feature)(nil)
	_ caddy.Validator           = (*Feature)(nil)
	_ feature.Plugin            = (*Feature)(nil)
	_ feature.PrincipalVerifier = (*Feature)(nil)
	_ feature.Front             = (*Gate)(nil)
)
