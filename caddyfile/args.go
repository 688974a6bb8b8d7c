package caddyfile

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
	"github.com/caddymcp/caddy-mcp/internal/origin"
)

func origins(d *caddyfile.Dispenser) ([]string, error) {
	origins, err := featurefile.ManyArgs(d)
	if err != nil {
		return nil, err
	}
	if err := origin.Check(origins); err != nil {
		return nil, d.WrapErr(err)
	}
	return origins, nil
}

// keepalive reads sse_keepalive: a positive duration, or off (-1).
func keepalive(d *caddyfile.Dispenser) (caddy.Duration, error) {
	v, err := featurefile.OneArg(d)
	if err != nil {
		return 0, err
	}
	if v == "off" {
		return -1, nil
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, d.Errf("sse_keepalive %q: want a positive duration such as 25s, or off", v)
	}
	return caddy.Duration(dur), nil
}
