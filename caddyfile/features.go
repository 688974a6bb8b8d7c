package caddyfile

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featurefile"
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

// guestFeature reports whether name is a feature's of this build that
// reads its own block.
func guestFeature(name string) bool {
	m, err := caddy.GetModule(feature.Namespace + "." + name)
	return err == nil && readsBlock(m)
}

func readsBlock(m caddy.ModuleInfo) bool {
	_, ok := m.New().(caddyfile.Unmarshaler)
	return ok
}

// unmarshalFeature reads the block of the feature sub into the features
// the block configures.
func (a *adaptation) unmarshalFeature(d *caddyfile.Dispenser, sub string) error {
	mod, err := caddyfile.UnmarshalModule(d, feature.Namespace+"."+sub)
	if err != nil {
		return err
	}
	var warnings []caddyconfig.Warning
	raw := caddyconfig.JSON(mod, &warnings)
	a.Feature(sub, func() any { return raw })
	for _, w := range warnings {
		a.Warn(w)
	}
	return nil
}

// mcpSubdirectives are the subdirectives of the mcp block: its own, and
// the guest features' of this build.
func mcpSubdirectives() []string {
	names := slices.Concat(subdirectives[""], featurefile.Names())
	for _, m := range caddy.GetModules(feature.Namespace) {
		if readsBlock(m) {
			names = append(names, m.ID.Name())
		}
	}
	return names
}
