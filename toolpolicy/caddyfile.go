package toolpolicy

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
)

// UnmarshalCaddyfile reads tools { allow <glob...>; deny <glob...>;
// deprecate <tool> <message> [<replacement...>]; timeout <glob> <duration> },
// each line as often as needed.
func (f *Feature) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the subdirective's name
	block := featurefile.At(d)
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := f.readLine(d); err != nil {
			return err
		}
	}
	if err := f.Validate(); err != nil {
		return featurefile.ErrAt(block, fmt.Errorf("tools: %w", err))
	}
	return nil
}

// readLine reads one line of the tools block.
func (f *Feature) readLine(d *caddyfile.Dispenser) error {
	sub := d.Val()
	args := d.RemainingArgs()
	switch sub {
	case "allow", "deny":
		if len(args) == 0 {
			return d.Errf("tools: %s needs at least one tool name or glob", sub)
		}
		if sub == "allow" {
			f.Allow = append(f.Allow, args...)
		} else {
			f.Deny = append(f.Deny, args...)
		}
	case "deprecate":
		if len(args) < 2 {
			return d.Errf(`tools: deprecate <tool> "<message>" [<replacement>...]`)
		}
		dep := Deprecation{Tool: args[0], Message: args[1]}
		if len(args) > 2 {
			dep.Replacements = args[2:]
		}
		f.Deprecate = append(f.Deprecate, dep)
	case "timeout":
		if len(args) != 2 {
			return d.Errf("tools: timeout <tool glob> <duration>")
		}
		after, err := caddy.ParseDuration(args[1])
		if err != nil || after <= 0 {
			return d.Errf("tools: timeout %s: %q is not a positive duration", args[0], args[1])
		}
		f.Timeouts = append(f.Timeouts, Timeout{Tools: args[0], After: caddy.Duration(after)})
	default:
		return featurefile.Unrecognized(d, "tools", sub, "allow", "deny", "deprecate", "timeout")
	}
	return nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Feature)(nil)
