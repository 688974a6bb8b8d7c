package limits

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// The rate limits' words in the mcp block:
//
//	rate_limit <name> {
//		key      <placeholder template>   # default {client_ip}
//		rate     <n>/<duration>           # required: 10/s, 600/1m, 5/30s, 1000/1d
//		burst    <n>                      # bucket size, default n
//		methods  <method...>              # default tools/call
//		tools    <glob...>                # default every tool
//		max_keys <n>                      # live buckets, default 1000000
//	}
//	store redis {                         # buckets shared by a fleet (package redisstore)
//		...
//	}
func init() {
	featurefile.Register("rate_limit", featurefile.Subdirective{
		Read:    readRateLimit,
		Repeats: true,
		Words:   map[string][]string{"rate_limit": {"key", "rate", "burst", "max_keys", "methods", "tools"}},
	})
	featurefile.Register("store", featurefile.Subdirective{Read: readStore})
}

// the is the rate limits the mcp block configures.
func the(a *featurefile.Adaptation) *Feature {
	return a.Feature("rate_limits", func() any { return new(Feature) }).(*Feature)
}

func readRateLimit(d *caddyfile.Dispenser, a *featurefile.Adaptation) error {
	block := featurefile.At(d)
	if !d.NextArg() {
		return d.Errf("rate_limit needs a name: rate_limit <name> { ... }")
	}
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	f := the(a)
	if _, dup := f.Limits[name]; dup {
		return d.Errf("rate_limit %q is defined twice", name)
	}
	what := fmt.Sprintf("rate_limit %q", name)
	rl := new(Config)
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := featurefile.Once(d, what, seen); err != nil {
			return err
		}
		if err := readSetting(d, rl, what); err != nil {
			return err
		}
	}
	if rl.Rate == "" {
		return featurefile.ErrAt(block, fmt.Errorf("%s: rate is required (e.g. rate 10/s)", what))
	}
	if err := rl.Validate(); err != nil {
		return featurefile.ErrAt(block, fmt.Errorf("%s: %w", what, err))
	}
	if err := a.Share("rate_limit", name, block, rl); err != nil {
		return err
	}
	if f.Limits == nil {
		f.Limits = make(map[string]*Config)
	}
	f.Limits[name] = rl
	return nil
}

func readSetting(d *caddyfile.Dispenser, rl *Config, what string) error {
	var err error
	switch sub := d.Val(); sub {
	case "key":
		rl.Key, err = featurefile.KeyTemplate(d, what)
	case "rate":
		rl.Rate, err = readRate(d)
	case "burst":
		rl.Burst, err = featurefile.PositiveInt(d)
	case "max_keys":
		rl.MaxKeys, err = featurefile.PositiveInt(d)
	case "methods":
		rl.Methods, err = featurefile.Methods(d, what)
	case "tools":
		rl.Tools, err = featurefile.ManyArgs(d)
	default:
		return featurefile.Unrecognized(d, "rate_limit", sub)
	}
	return err
}

// readRate reads a rate and writes it in its canonical form.
func readRate(d *caddyfile.Dispenser) (string, error) {
	s, err := featurefile.OneArg(d)
	if err != nil {
		return "", err
	}
	r, err := ratelimit.ParseRate(s)
	if err != nil {
		return "", d.Errf("%v", err)
	}
	return r.String(), nil
}

// readStore reads store <backend> { ... } with the backend's own
// Caddyfile syntax: the module http.handlers.mcp.stores.<backend>.
func readStore(d *caddyfile.Dispenser, a *featurefile.Adaptation) error {
	if !d.NextArg() {
		return d.Errf("store needs a backend: store redis { ... }")
	}
	backend := d.Val()
	mod, err := caddyfile.UnmarshalModule(d, "http.handlers.mcp.stores."+backend)
	if err != nil {
		return err
	}
	var warnings []caddyconfig.Warning
	the(a).StoreRaw = caddyconfig.JSONModuleObject(mod, "backend", backend, &warnings)
	for _, w := range warnings {
		a.Warn(w)
	}
	return nil
}
