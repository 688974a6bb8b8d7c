package caddyfile

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddymcp/caddy-mcp/handler"
)

// unmarshalResults reads
//
//	results {
//		max <size>          # every tool's result
//		max <glob> <size>   # the tools the glob matches; the first rule that matches
//		tokens <n>          # every tool's, in estimated tokens (bytes / 4)
//		truncate [<glob>...] # these tools' results (no glob: all) are cut to fit, not refused
//	}
func unmarshalResults(d *caddyfile.Dispenser) (*handler.Results, error) {
	block := at(d)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	r := new(handler.Results)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		args := d.RemainingArgs()
		switch {
		case sub == "max" && len(args) == 1 && r.Max == 0:
			size, err := humanize.ParseBytes(args[0])
			if err != nil || size == 0 {
				return nil, d.Errf("max %q: want a size such as 100KiB", args[0])
			}
			r.Max = int64(size)
		case sub == "max" && len(args) == 2:
			size, err := humanize.ParseBytes(args[1])
			if err != nil || size == 0 {
				return nil, d.Errf("max %s %q: want a size such as 20KiB", args[0], args[1])
			}
			r.Tools = append(r.Tools, handler.ResultsRule{Match: args[0], Max: int64(size)})
		case sub == "tokens" && len(args) == 1 && r.Tokens == 0:
			n, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || n <= 0 {
				return nil, d.Errf("tokens %q: want a positive number", args[0])
			}
			r.Tokens = n
		case sub == "truncate" && r.Truncate == nil:
			r.Truncate = args
			if len(args) == 0 {
				r.Truncate = []string{"*"}
			}
		case sub == "max" || sub == "tokens" || sub == "truncate":
			return nil, d.Errf("results: %s takes %s, once", sub, map[string]string{"max": "<size> or <glob> <size>", "tokens": "<n>", "truncate": "[<glob>...]"}[sub])
		default:
			return nil, unrecognized(d, "results", sub)
		}
	}
	if err := r.Validate(); err != nil {
		return nil, errAt(block, err)
	}
	return r, nil
}
