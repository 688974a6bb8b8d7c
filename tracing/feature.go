package tracing

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

func init() {
	caddy.RegisterModule(Feature{})
}

// Feature is tracing as a feature of the mcp handler: the module
// http.handlers.mcp.features.tracing. It has no settings, and is on by
// default (feature.Default): every mcp handler loads it, and it traces
// the requests Caddy's tracing directive traces, nothing more.
type Feature struct{}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".tracing",
		New: func() caddy.Module { return new(Feature) },
	}
}

// ByDefault: every mcp handler loads tracing; Caddy's tracing directive
// is its switch.
func (*Feature) ByDefault() bool { return true }

// Provision registers the spans' metric with the config's registry.
func (*Feature) Provision(ctx caddy.Context) error {
	return promreg.Register(ctx, Collectors()...)
}

// toolsKey names the config's tool names among what its handlers share.
const toolsKey = "tracing.tools"

// Parts plugs the tracer, its metric labelled by the tool names of the
// handler's config.
func (*Feature) Parts(h feature.Host) (feature.Parts, error) {
	tools, err := h.ShareInConfig(toolsKey, func() (any, error) { return newTools(), nil })
	if err != nil {
		return feature.Parts{}, err
	}
	return feature.Parts{Tracer: tracer{tools.(*Tools)}}, nil
}

// tracer starts the spans of each request Caddy traces.
type tracer struct{ tools *Tools }

// Start opens the spans of x's messages, or says that x is not traced.
func (t tracer) Start(x *feature.Exchange) feature.Trace {
	if s := Start(x, t.tools); s != nil {
		return s
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner = (*Feature)(nil)
	_ feature.Plugin    = (*Feature)(nil)
	_ feature.Default   = (*Feature)(nil)
	_ feature.Tracer    = tracer{}
	_ feature.Trace     = (*Spans)(nil)
)
