package results

import (
	"math"
	"strconv"

	"github.com/caddyserver/caddy/v2"
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
	if sub == "store" {
		return r.readStore(d)
	}
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
	case sub == "page" && r.Page == nil:
		r.Page = args
		if len(args) == 0 {
			r.Page = []string{"*"}
		}
	case sub == "max" || sub == "tokens" || sub == "truncate" || sub == "page":
		return d.Errf("results: %s takes %s, once", sub, map[string]string{"max": "<size> or <glob> <size>", "tokens": "<n>", "truncate": "[<glob>...]", "page": "[<glob>...]"}[sub])
	default:
		return featurefile.Unrecognized(d, "results", sub, "max", "tokens", "truncate", "page", "store")
	}
	return nil
}

// readStore reads the store block.
func (r *Config) readStore(d *caddyfile.Dispenser) error {
	if r.Store != nil || d.NextArg() {
		return d.Err("results: store takes a block, once")
	}
	r.Store = new(StoreConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := r.Store.readLine(d); err != nil {
			return err
		}
	}
	return nil
}

// readLine reads one line of the store block.
func (s *StoreConfig) readLine(d *caddyfile.Dispenser) error {
	sub := d.Val()
	args := d.RemainingArgs()
	size := func(i int) (int64, error) {
		n, err := humanize.ParseBytes(args[i])
		if err != nil || n == 0 || n > math.MaxInt64 {
			return 0, d.Errf("store: %s %q: want a size such as 1GiB", sub, args[i])
		}
		return int64(n), nil
	}
	var err error
	switch {
	case sub == "key" && len(args) == 1:
		s.Key = args[0]
	case sub == "ttl" && len(args) == 1:
		ttl, perr := caddy.ParseDuration(args[0])
		if perr != nil || ttl <= 0 {
			return d.Errf("store: ttl %q: want a duration such as 1h", args[0])
		}
		s.TTL = caddy.Duration(ttl)
	case sub == "max_result" && len(args) == 1:
		s.MaxResult, err = size(0)
	case sub == "total" && len(args) == 1:
		s.Total, err = size(0)
	case sub == "per_principal" && (len(args) == 1 || len(args) == 2):
		if s.PerPrincipal, err = size(0); err == nil && len(args) == 2 {
			n, perr := strconv.Atoi(args[1])
			if perr != nil || n <= 0 {
				return d.Errf("store: per_principal count %q: want a positive number", args[1])
			}
			s.PerPrincipalCount = n
		}
	case sub == "key" || sub == "ttl" || sub == "max_result" || sub == "total" || sub == "per_principal":
		return d.Errf("store: %s takes %s", sub, map[string]string{"key": "<secret>", "ttl": "<duration>", "max_result": "<size>", "total": "<size>", "per_principal": "<size> [<count>]"}[sub])
	default:
		return featurefile.Unrecognized(d, "store", sub, "key", "ttl", "max_result", "per_principal", "total")
	}
	return err
}
