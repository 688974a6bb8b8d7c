package results

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
)

// UnmarshalCaddyfile reads the results block (Feature).
func (f *Feature) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the subdirective's name
	block := featurefile.At(d)
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := f.Config.readLine(d); err != nil {
			return err
		}
	}
	if err := f.Config.Validate(); err != nil {
		return featurefile.ErrAt(block, err)
	}
	return nil
}

// readLine reads one line of the results block.
func (r *Config) readLine(d *caddyfile.Dispenser) error {
	sub := d.Val()
	args := d.RemainingArgs()
	switch {
	case sub == "max" && len(args) == 1 && r.Max == 0:
		size, err := humanize.ParseBytes(args[0])
		if err != nil || size == 0 {
			return d.Errf("max %q: want a size such as 100KiB", args[0])
		}
		r.Max = int64(size)
	case sub == "max" && len(args) == 2:
		size, err := humanize.ParseBytes(args[1])
		if err != nil || size == 0 {
			return d.Errf("max %s %q: want a size such as 20KiB", args[0], args[1])
		}
		r.Tools = append(r.Tools, Rule{Match: args[0], Max: int64(size)})
	case sub == "tokens" && len(args) == 1 && r.Tokens == 0:
		n, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || n <= 0 {
			return d.Errf("tokens %q: want a positive number", args[0])
		}
		r.Tokens = n
	case sub == "truncate" && r.Truncate == nil:
		r.Truncate = args
		if len(args) == 0 {
			r.Truncate = []string{"*"}
		}
	case sub == "max" || sub == "tokens" || sub == "truncate":
		return d.Errf("results: %s takes %s, once", sub, map[string]string{"max": "<size> or <glob> <size>", "tokens": "<n>", "truncate": "[<glob>...]"}[sub])
	default:
		return featurefile.Unrecognized(d, "results", sub, "max", "tokens", "truncate")
	}
	return nil
}
