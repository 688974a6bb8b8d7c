package caddyfile

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/handler"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// unmarshalValidate reads validate [{ max_catalog_size <size> }], and
// returns the size (0: none given).
func unmarshalValidate(d *caddyfile.Dispenser) (int64, error) {
	if err := noArgs(d); err != nil {
		return 0, err
	}
	var size int64
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_catalog_size":
			if size != 0 {
				return 0, d.Errf("max_catalog_size given twice")
			}
			var err error
			if size, err = oneSize(d); err != nil {
				return 0, err
			}
		default:
			return 0, unrecognized(d, "validate", d.Val())
		}
	}
	return size, nil
}

// unmarshalContract reads contract <file> [{ on_breaking warn|refuse }].
func unmarshalContract(d *caddyfile.Dispenser) (*handler.Contract, error) {
	c := new(handler.Contract)
	if !d.NextArg() {
		return nil, d.Errf("contract needs a lockfile: contract <file> (written by caddy mcp-lock)")
	}
	c.File = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "on_breaking":
			v, err := oneArg(d)
			if err != nil {
				return nil, err
			}
			c.OnBreaking = v
		default:
			return nil, unrecognized(d, "contract", d.Val())
		}
	}
	if err := c.Validate(); err != nil {
		return nil, d.Errf("contract: %v", err)
	}
	return c, nil
}

// unmarshalTools reads tools { allow <glob...>; deny <glob...>;
// deprecate <tool> <message> [<replacement...>]; timeout <glob> <duration> },
// each line as often as needed.
func unmarshalTools(d *caddyfile.Dispenser) (*handler.Tools, error) {
	block := at(d)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	t := new(handler.Tools)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		args := d.RemainingArgs()
		switch sub {
		case "allow", "deny":
			if len(args) == 0 {
				return nil, d.Errf("tools: %s needs at least one tool name or glob", sub)
			}
			if sub == "allow" {
				t.Allow = append(t.Allow, args...)
			} else {
				t.Deny = append(t.Deny, args...)
			}
		case "deprecate":
			if len(args) < 2 {
				return nil, d.Errf(`tools: deprecate <tool> "<message>" [<replacement>...]`)
			}
			d := toolpolicy.Deprecation{Tool: args[0], Message: args[1]}
			if len(args) > 2 {
				d.Replacements = args[2:]
			}
			t.Deprecate = append(t.Deprecate, d)
		case "timeout":
			if len(args) != 2 {
				return nil, d.Errf("tools: timeout <tool glob> <duration>")
			}
			after, err := caddy.ParseDuration(args[1])
			if err != nil || after <= 0 {
				return nil, d.Errf("tools: timeout %s: %q is not a positive duration", args[0], args[1])
			}
			t.Timeouts = append(t.Timeouts, handler.ToolTimeout{Tools: args[0], After: caddy.Duration(after)})
		default:
			return nil, unrecognized(d, "tools", sub)
		}
	}
	if err := t.Validate(); err != nil {
		return nil, errAt(block, fmt.Errorf("tools: %w", err))
	}
	return t, nil
}
