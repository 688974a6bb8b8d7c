package featurefile

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/spelling"
	"github.com/caddymcp/caddy-mcp/keys"
)

// The readers of a subdirective's values: each reads the values of the
// subdirective the dispenser is on, and refuses what is not one at its
// line, naming the subdirective.

// NoArgs refuses values.
func NoArgs(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// OneArg reads exactly one value.
func OneArg(d *caddyfile.Dispenser) (string, error) {
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

// ManyArgs reads one value or more.
func ManyArgs(d *caddyfile.Dispenser) ([]string, error) {
	sub := d.Val()
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.Errf("%s needs at least one value", sub)
	}
	return args, nil
}

// PositiveInt reads a whole number above 0.
func PositiveInt(d *caddyfile.Dispenser) (int, error) {
	sub := d.Val()
	s, err := OneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, d.Errf("%s %q: want a positive whole number", sub, s)
	}
	return n, nil
}

// NonNegativeInt reads a whole number, 0 or more.
func NonNegativeInt(d *caddyfile.Dispenser) (int, error) {
	sub := d.Val()
	s, err := OneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, d.Errf("%s %q: want a whole number, 0 or more", sub, s)
	}
	return n, nil
}

// PositiveDuration reads a duration above 0 (30s, 1m, 1d).
func PositiveDuration(d *caddyfile.Dispenser) (caddy.Duration, error) {
	sub := d.Val()
	s, err := OneArg(d)
	if err != nil {
		return 0, err
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s %q: want a positive duration such as 30s", sub, s)
	}
	return caddy.Duration(dur), nil
}

// Size reads a size in bytes (4MiB, 65536), at most 1 TiB.
func Size(d *caddyfile.Dispenser) (int64, error) {
	sub := d.Val()
	s, err := OneArg(d)
	if err != nil {
		return 0, err
	}
	size, err := humanize.ParseBytes(s)
	if err != nil || size == 0 || size > 1<<40 {
		return 0, d.Errf("%s %q: want a size such as 4MiB or 65536", sub, s)
	}
	return int64(size), nil
}

// KeyTemplate reads the key template of a rule of block (package keys).
func KeyTemplate(d *caddyfile.Dispenser, block string) (string, error) {
	v, err := OneArg(d)
	if err != nil {
		return "", err
	}
	if err := keys.Check(v); err != nil {
		return "", d.Errf("%s: key %q: %v", block, v, err)
	}
	return v, nil
}

// Methods reads the MCP methods a rule of block applies to.
func Methods(d *caddyfile.Dispenser, block string) ([]string, error) {
	methods, err := ManyArgs(d)
	if err != nil {
		return nil, err
	}
	if err := feature.CheckMethods(methods); err != nil {
		return nil, d.Errf("%s: %v", block, err)
	}
	return methods, nil
}

// Unrecognized is the error for a subdirective name the block named block
// does not know, at its line, with the known one it is closest to (the
// words registered for block, and known).
func Unrecognized(d *caddyfile.Dispenser, block, name string, known ...string) error {
	what := strings.TrimPrefix(block+" subdirective", " ")
	known = append(known, words(block)...)
	if near := spelling.Nearest(name, known); near != "" {
		return d.Errf("unrecognized %s %q: did you mean %q?", what, name, near)
	}
	return d.Errf("unrecognized %s %q", what, name)
}

// Once refuses a subdirective of a block given twice; seen records those
// given so far.
func Once(d *caddyfile.Dispenser, block string, seen map[string]bool) error {
	sub := d.Val()
	if seen[sub] {
		return d.Errf("%s: %s given twice", block, sub)
	}
	seen[sub] = true
	return nil
}
