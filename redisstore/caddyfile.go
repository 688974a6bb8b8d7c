package redisstore

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/internal/spelling"
)

// blockOptions are the store block's options, for suggestions.
var blockOptions = []string{"address", "username", "password", "key_prefix", "timeout", "on_error"}

// UnmarshalCaddyfile reads the store's block:
//
//	store redis {
//		address    <url...>
//		username   <user>
//		password   <password>
//		key_prefix <prefix>
//		timeout    <duration>
//		on_error   local|allow|deny
//	}
func (r *Redis) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the backend's name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return d.Errf("%s given twice", opt)
		}
		seen[opt] = true
		if opt == "address" {
			r.Addresses = d.RemainingArgs()
			if len(r.Addresses) == 0 {
				return d.Errf("address needs at least one value: redis://host:port/db")
			}
			continue
		}
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "username":
			r.Username = v
		case "password":
			r.Password = v
		case "key_prefix":
			r.KeyPrefix = v
		case "timeout":
			t, err := caddy.ParseDuration(v)
			if err != nil || t <= 0 {
				return d.Errf("timeout %q: want a positive duration such as 50ms", v)
			}
			r.Timeout = caddy.Duration(t)
		case "on_error":
			r.OnError = OnError(v)
		default:
			if near := spelling.Nearest(opt, blockOptions); near != "" {
				return d.Errf("unrecognized store redis option %q: did you mean %q?", opt, near)
			}
			return d.Errf("unrecognized store redis option %q", opt)
		}
	}
	if err := r.Validate(); err != nil {
		return d.WrapErr(err)
	}
	return nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Redis)(nil)
