package caddyfile

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/handler"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// place is where a shared name was configured, and how.
type place struct {
	at       string
	settings string
}

// sharedNames are the rate limits and named concurrency blocks of the whole
// Caddyfile, by kind and name, kept in the adapter's state.
func sharedNames(state map[string]any) map[string]place {
	const key = "mcp.shared_names"
	names, ok := state[key].(map[string]place)
	if !ok {
		names = make(map[string]place)
		state[key] = names
	}
	return names
}

// share records that a rate limit or a named concurrency block is
// configured at, with settings, and refuses it when the name was configured
// differently elsewhere.
func share(names map[string]place, kind, name, at string, settings any) error {
	b, err := json.Marshal(settings)
	if err != nil {
		return err
	}
	k := kind + " " + name
	if prev, ok := names[k]; ok && prev.settings != string(b) {
		return fmt.Errorf("%s %q is configured at %s and, differently, at %s: a name shares its state, so every use of it must give the same settings; rename one to keep them apart", kind, name, prev.at, at)
	}
	names[k] = place{at: at, settings: string(b)}
	return nil
}

func unmarshalRateLimit(d *caddyfile.Dispenser, cfg *handler.Handler, names map[string]place) error {
	block := at(d)
	if !d.NextArg() {
		return d.Errf("rate_limit needs a name: rate_limit <name> { ... }")
	}
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if _, dup := cfg.RateLimits[name]; dup {
		return d.Errf("rate_limit %q is defined twice", name)
	}
	rl := new(handler.RateLimit)
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] {
			return d.Errf("rate_limit %q: %s given twice", name, sub)
		}
		seen[sub] = true
		var err error
		switch sub {
		case "key":
			rl.Key, err = keyTemplate(d, fmt.Sprintf("rate_limit %q", name))
		case "rate":
			rl.Rate, err = rate(d)
		case "burst":
			rl.Burst, err = positiveInt(d)
		case "max_keys":
			rl.MaxKeys, err = positiveInt(d)
		case "methods":
			rl.Methods, err = methods(d, fmt.Sprintf("rate_limit %q", name))
		case "tools":
			rl.Tools, err = manyArgs(d)
		default:
			return unrecognized(d, "rate_limit", sub)
		}
		if err != nil {
			return err
		}
	}
	if rl.Rate == "" {
		return errAt(block, fmt.Errorf("rate_limit %q: rate is required (e.g. rate 10/s)", name))
	}
	if err := rl.Validate(); err != nil {
		return errAt(block, fmt.Errorf("rate_limit %q: %w", name, err))
	}
	if err := share(names, "rate_limit", name, block, rl); err != nil {
		return err
	}
	if cfg.RateLimits == nil {
		cfg.RateLimits = make(map[string]*handler.RateLimit)
	}
	cfg.RateLimits[name] = rl
	return nil
}

func unmarshalConcurrency(d *caddyfile.Dispenser, names map[string]place) (*handler.Concurrency, error) {
	block := at(d)
	c := new(handler.Concurrency)
	if d.NextArg() {
		c.Name = d.Val()
		if d.NextArg() {
			return nil, d.ArgErr()
		}
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] {
			return nil, d.Errf("concurrency: %s given twice", sub)
		}
		seen[sub] = true
		var err error
		switch sub {
		case "max":
			c.Max, err = positiveInt(d)
		case "queue":
			c.Queue, err = nonNegativeInt(d)
		case "queue_timeout":
			c.QueueTimeout, err = positiveDuration(d)
		case "cancel_grace":
			c.CancelGrace, err = positiveDuration(d)
		case "key":
			c.Key, err = keyTemplate(d, "concurrency")
		case "methods":
			c.Methods, err = methods(d, "concurrency")
		default:
			return nil, unrecognized(d, "concurrency", sub)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.Max == 0 {
		return nil, errAt(block, errors.New("concurrency: max is required (e.g. max 10)"))
	}
	if err := c.Validate(); err != nil {
		return nil, errAt(block, fmt.Errorf("concurrency: %w", err))
	}
	if c.Name != "" {
		if err := share(names, "concurrency", c.Name, block, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// rate reads a rate and writes it in its canonical form.
func rate(d *caddyfile.Dispenser) (string, error) {
	s, err := oneArg(d)
	if err != nil {
		return "", err
	}
	r, err := ratelimit.ParseRate(s)
	if err != nil {
		return "", d.Errf("%v", err)
	}
	return r.String(), nil
}

// keyTemplate reads the key of a limit or a guard, checked at its line.
func keyTemplate(d *caddyfile.Dispenser, block string) (string, error) {
	v, err := oneArg(d)
	if err != nil {
		return "", err
	}
	if err := keys.Check(v); err != nil {
		return "", d.Errf("%s: key %q: %v", block, v, err)
	}
	return v, nil
}

// methods reads the methods of a limit or a guard, checked at their line.
func methods(d *caddyfile.Dispenser, block string) ([]string, error) {
	methods, err := manyArgs(d)
	if err != nil {
		return nil, err
	}
	if err := feature.CheckMethods(methods); err != nil {
		return nil, d.Errf("%s: %v", block, err)
	}
	return methods, nil
}

// unmarshalStore reads store <backend> { ... } with the backend's own
// Caddyfile syntax: the module http.handlers.mcp.stores.<backend>.
func unmarshalStore(d *caddyfile.Dispenser) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.Errf("store needs a backend: store redis { ... }")
	}
	backend := d.Val()
	mod, err := caddyfile.UnmarshalModule(d, "http.handlers.mcp.stores."+backend)
	if err != nil {
		return nil, err
	}
	return caddyconfig.JSONModuleObject(mod, "backend", backend, nil), nil
}
