package caddyfile

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddymcp/caddy-mcp/handler"
)

func noArgs(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func oneArg(d *caddyfile.Dispenser) (string, error) {
	sub := d.Val()
	if !d.NextArg() {
		return "", d.Errf("%s needs a value", sub)
	}
	v := d.Val()
	if d.NextArg() {
		return "", d.Errf("%s takes one value, got another: %q", sub, d.Val())
	}
	return v, nil
}

func manyArgs(d *caddyfile.Dispenser) ([]string, error) {
	sub := d.Val()
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.Errf("%s needs at least one value", sub)
	}
	return args, nil
}

func positiveInt(d *caddyfile.Dispenser) (int, error) {
	sub := d.Val()
	s, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, d.Errf("%s %q: want a positive whole number", sub, s)
	}
	return n, nil
}

func positiveDuration(d *caddyfile.Dispenser) (caddy.Duration, error) {
	sub := d.Val()
	s, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s %q: want a positive duration such as 30s", sub, s)
	}
	return caddy.Duration(dur), nil
}

func oneSize(d *caddyfile.Dispenser) (int64, error) {
	sub := d.Val()
	s, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	size, err := humanize.ParseBytes(s)
	if err != nil || size == 0 || size > 1<<40 {
		return 0, d.Errf("%s %q: want a size such as 4MiB or 65536", sub, s)
	}
	return int64(size), nil
}

func origins(d *caddyfile.Dispenser) ([]string, error) {
	origins, err := manyArgs(d)
	if err != nil {
		return nil, err
	}
	if err := handler.CheckAllowedOrigins(origins); err != nil {
		return nil, d.WrapErr(err)
	}
	return origins, nil
}

// keepalive reads sse_keepalive: a positive duration, or off (-1).
func keepalive(d *caddyfile.Dispenser) (caddy.Duration, error) {
	v, err := oneArg(d)
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
