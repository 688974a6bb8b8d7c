package caddyfile

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/handler"
)

// unmarshalSessions reads sessions { secret ...; ttl ...; bind ... }. A
// first secret that expands to nothing here is warned of, at its line:
// Caddy refuses the config wherever it is empty, and a config may be
// adapted where it does not run.
func unmarshalSessions(d *caddyfile.Dispenser, warn func(caddyconfig.Warning)) (*handler.Sessions, error) {
	block := at(d)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	s := new(handler.Sessions)
	var secretFile string
	var secretLine int
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] {
			return nil, d.Errf("sessions: %s given twice", sub)
		}
		seen[sub] = true
		var err error
		switch sub {
		case "secret":
			secretFile, secretLine = d.File(), d.Line()
			s.Secrets, err = manyArgs(d)
		case "ttl":
			s.TTL, err = positiveDuration(d)
		case "bind":
			s.Bind, err = bind(d)
		default:
			return nil, unrecognized(d, "sessions", sub)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := s.Validate(); err != nil {
		return nil, errAt(block, fmt.Errorf("sessions: %w", err))
	}
	if err := s.CheckSealingSecret(); err != nil {
		warn(caddyconfig.Warning{
			File: secretFile, Line: secretLine, Directive: "mcp",
			Message: fmt.Sprintf("sessions: %v. Caddy refuses this config where it is empty", err),
		})
	}
	return s, nil
}

// bind reads sessions' bind, checked at its line.
func bind(d *caddyfile.Dispenser) (string, error) {
	v, err := oneArg(d)
	if err != nil {
		return "", err
	}
	if err := (&handler.Sessions{Bind: v}).Validate(); err != nil {
		return "", d.Errf("sessions: %v", err)
	}
	return v, nil
}
