package caddyfile

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/handler"
)

// A guest feature (feature.Namespace) is a subdirective of mcp under its
// module's name, whose block the module reads itself (a
// caddyfile.Unmarshaler), as reverse_proxy's transports and lb_policy
// read theirs:
//
//	mcp {
//		audit {
//			methods tools/call prompts/get
//		}
//	}

// guestFeature reports whether name is a guest feature's, one that this
// build holds.
func guestFeature(name string) bool {
	_, err := caddy.GetModule(feature.Namespace + "." + name)
	return err == nil
}

// unmarshalFeature reads the block of the guest feature sub into cfg's
// features.
func (a *adaptation) unmarshalFeature(d *caddyfile.Dispenser, cfg *handler.Handler, sub string) error {
	mod, err := caddyfile.UnmarshalModule(d, feature.Namespace+"."+sub)
	if err != nil {
		return err
	}
	var warnings []caddyconfig.Warning
	cfg.FeaturesRaw = append(cfg.FeaturesRaw, caddyconfig.JSONModuleObject(mod, "feature", sub, &warnings))
	for _, w := range warnings {
		a.warn(w)
	}
	return nil
}

// mcpSubdirectives are the subdirectives of the mcp block: its own, and
// the guest features' of this build.
func mcpSubdirectives() []string {
	names := slices.Clone(subdirectives[""])
	for _, m := range caddy.GetModules(feature.Namespace) {
		names = append(names, m.ID.Name())
	}
	return names
}
