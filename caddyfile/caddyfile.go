// Package caddyfile turns the mcp Caddyfile directive into the handler's
// configuration. Placeholders are left for the handler to expand per
// request; values are checked here with the handler's own rules, so that a
// mistake is reported with the file and line it is on. Rate limits and named
// concurrency blocks given the same name in two sites must agree, since they
// share their state: a disagreement names both places.
//
//	mcp {
//		rate_limit <name> {
//			key      <placeholder template>   # default {client_ip}
//			rate     <n>/<duration>           # required: 10/s, 600/1m, 5/30s, 1000/1d
//			burst    <n>                      # bucket size, default n
//			methods  <method...>              # default tools/call
//			tools    <glob...>                # default every tool
//			max_keys <n>                      # live buckets, default 1000000
//		}
//		max_request_body <size>               # default 4MiB
//		read_body_timeout <duration>          # default 10s
//		max_batch <n>                         # messages per POST, default 16
//		concurrency [<name>] {
//			max           <n>                 # in flight, required
//			queue         <n>                 # waiting, default 0
//			queue_timeout <duration>          # default 10s
//			cancel_grace  <duration>          # places kept after the client left, default 5s
//			key           <template>          # one guard per value; default one guard
//			methods       <method...>         # default tools/call
//		}
//		allowed_origins <origin...>           # default loopback origins only
//		upstream_retry_after <duration>       # default 30s
//		sse_keepalive <duration>|off          # comment line on idle event streams, default 25s
//		log_key                               # log the key of refused requests
//		validate {                            # check tools/call arguments against the learned inputSchema
//			max_catalog_size <size>           # memory of the tools learned, default 128MiB
//		}
//		contract <file> {                     # the approved tools (caddy mcp-lock): drift logged, told to the model
//			on_breaking warn|refuse           # default warn
//		}
//		upstream_cancels_on_close             # the upstream stops a 2026-07-28 call when its stream closes
//		sessions {                            # pin 2025-era sessions to their upstream (package session)
//			secret <secret...>                # the first seals, all open; default: keys in Caddy's storage
//			ttl    <duration>                 # default 24h
//			bind   <placeholder template>     # the principal a session belongs to; default none
//		}
//		store redis {                         # buckets shared by a fleet (package redisstore)
//			address    <url...>               # redis://host:port/db, rediss:// for TLS; several: a cluster
//			username   <user>
//			password   <password>
//			key_prefix <prefix>               # default caddy-mcp:
//			timeout    <duration>             # per decision, default 50ms
//			on_error   local|allow|deny       # when Redis does not answer, default local
//		}
//	}
package caddyfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/handler"
	"github.com/caddymcp/caddy-mcp/internal/spelling"
	"github.com/caddymcp/caddy-mcp/ratelimit"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// Parse is the mcp directive's unmarshaler, for
// httpcaddyfile.RegisterHandlerDirective.
func Parse(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	cfg := new(handler.Handler)
	a := &adaptation{names: sharedNames(h.State), warn: warner(h)}
	if err := a.unmarshal(h.Dispenser, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Unmarshal reads one mcp directive from d into cfg. Warnings are left
// out.
func Unmarshal(d *caddyfile.Dispenser, cfg *handler.Handler) error {
	a := &adaptation{names: make(map[string]place), warn: func(caddyconfig.Warning) {}}
	return a.unmarshal(d, cfg)
}

// adaptation is what adapting one mcp directive shares with the rest of
// the Caddyfile: the shared names it must agree with, and the warnings.
type adaptation struct {
	names map[string]place
	warn  func(caddyconfig.Warning)
}

// warner returns what adds a warning to those the adapter returns. Caddy
// v2.11's Helper keeps them in an unexported field, with no method to add
// one; where that field is not found, a warning is logged as Caddy logs
// the adapter's warnings.
func warner(h httpcaddyfile.Helper) func(caddyconfig.Warning) {
	f := reflect.ValueOf(h).FieldByName("warnings")
	if f.IsValid() && f.Type() == reflect.TypeFor[*[]caddyconfig.Warning]() && !f.IsNil() {
		warnings := (*[]caddyconfig.Warning)(f.UnsafePointer())
		return func(w caddyconfig.Warning) { *warnings = append(*warnings, w) }
	}
	return func(w caddyconfig.Warning) {
		caddy.Log().Named("adapters.caddyfile").Warn(w.Directive+": "+w.Message,
			zap.String("file", w.File), zap.Int("line", w.Line))
	}
}

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

// at is where the dispenser's current token is, as Caddy writes it.
func at(d *caddyfile.Dispenser) string {
	return d.File() + ":" + strconv.Itoa(d.Line())
}

// errAt is an error at a place, worded as the dispenser words its own.
func errAt(place string, err error) error {
	return fmt.Errorf("%w, at %s", err, place)
}

func (a *adaptation) unmarshal(d *caddyfile.Dispenser, cfg *handler.Handler) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] && sub != "rate_limit" {
			return d.Errf("%s given twice", sub)
		}
		seen[sub] = true
		if err := a.unmarshalOption(d, cfg, sub); err != nil {
			return err
		}
	}
	return nil
}

// subdirectives are those of each block of the mcp directive, by block
// ("" for the mcp block itself), for suggestions.
var subdirectives = map[string][]string{
	"": {
		"rate_limit", "concurrency", "store", "sessions", "allowed_origins", "sse_keepalive", "log_key",
		"validate", "contract", "tools", "upstream_cancels_on_close", "upstream_retry_after",
		"max_request_body", "read_body_timeout", "max_batch",
	},
	"rate_limit":  {"key", "rate", "burst", "max_keys", "methods", "tools"},
	"concurrency": {"max", "queue", "queue_timeout", "cancel_grace", "key", "methods"},
	"sessions":    {"secret", "ttl", "bind"},
	"tools":       {"allow", "deny", "deprecate", "timeout"},
	"validate":    {"max_catalog_size"},
	"contract":    {"on_breaking"},
}

// unmarshalOption reads one subdirective of the mcp block into cfg.
func (a *adaptation) unmarshalOption(d *caddyfile.Dispenser, cfg *handler.Handler, sub string) error {
	var err error
	switch sub {
	case "rate_limit":
		err = unmarshalRateLimit(d, cfg, a.names)
	case "concurrency":
		cfg.Concurrency, err = unmarshalConcurrency(d, a.names)
	case "store":
		cfg.StoreRaw, err = unmarshalStore(d)
	case "sessions":
		cfg.Sessions, err = unmarshalSessions(d, a.warn)
	case "allowed_origins":
		cfg.AllowedOrigins, err = origins(d)
	case "sse_keepalive":
		cfg.SSEKeepalive, err = keepalive(d)
	case "log_key":
		cfg.LogKey, err = true, noArgs(d)
	case "validate":
		cfg.ValidateCalls = true
		cfg.MaxCatalogSize, err = unmarshalValidate(d)
	case "contract":
		cfg.Contract, err = unmarshalContract(d)
	case "tools":
		cfg.Tools, err = unmarshalTools(d)
	case "upstream_cancels_on_close":
		cfg.UpstreamCancelsOnClose, err = true, noArgs(d)
	case "upstream_retry_after":
		cfg.UpstreamRetryAfter, err = positiveDuration(d)
	case "max_request_body":
		cfg.MaxRequestBody, err = oneSize(d)
	case "read_body_timeout":
		cfg.ReadBodyTimeout, err = positiveDuration(d)
	case "max_batch":
		cfg.MaxBatch, err = positiveInt(d)
	default:
		return unrecognized(d, "", sub)
	}
	return err
}

// unrecognized is the error for a subdirective name that block does not
// know, at its line, with the known one it is closest to.
func unrecognized(d *caddyfile.Dispenser, block, name string) error {
	what := strings.TrimPrefix(block+" subdirective", " ")
	if near := spelling.Nearest(name, subdirectives[block]); near != "" {
		return d.Errf("unrecognized %s %q: did you mean %q?", what, name, near)
	}
	return d.Errf("unrecognized %s %q", what, name)
}

// unmarshalValidate reads validate [{ max_catalog_size <size> }], and
// returns the size (0: none given).
func unmarshalValidate(d *caddyfile.Dispenser) (int64, error) {
	if err := noArgs(d); err != nil {
		return 0, err
	}
	var size int64
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_catalog_size":
			if size != 0 {
				return 0, d.Errf("max_catalog_size given twice")
			}
			var err error
			if size, err = oneSize(d); err != nil {
				return 0, err
			}
		default:
			return 0, unrecognized(d, "validate", d.Val())
		}
	}
	return size, nil
}

// unmarshalContract reads contract <file> [{ on_breaking warn|refuse }].
func unmarshalContract(d *caddyfile.Dispenser) (*handler.Contract, error) {
	c := new(handler.Contract)
	if !d.NextArg() {
		return nil, d.Errf("contract needs a lockfile: contract <file> (written by caddy mcp-lock)")
	}
	c.File = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "on_breaking":
			v, err := oneArg(d)
			if err != nil {
				return nil, err
			}
			c.OnBreaking = v
		default:
			return nil, unrecognized(d, "contract", d.Val())
		}
	}
	if err := c.Validate(); err != nil {
		return nil, d.Errf("contract: %v", err)
	}
	return c, nil
}

// unmarshalTools reads tools { allow <glob...>; deny <glob...>;
// deprecate <tool> <message> [<replacement...>]; timeout <glob> <duration> },
// each line as often as needed.
func unmarshalTools(d *caddyfile.Dispenser) (*handler.Tools, error) {
	block := at(d)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	t := new(handler.Tools)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		args := d.RemainingArgs()
		switch sub {
		case "allow", "deny":
			if len(args) == 0 {
				return nil, d.Errf("tools: %s needs at least one tool name or glob", sub)
			}
			if sub == "allow" {
				t.Allow = append(t.Allow, args...)
			} else {
				t.Deny = append(t.Deny, args...)
			}
		case "deprecate":
			if len(args) < 2 {
				return nil, d.Errf(`tools: deprecate <tool> "<message>" [<replacement>...]`)
			}
			d := toolpolicy.Deprecation{Tool: args[0], Message: args[1]}
			if len(args) > 2 {
				d.Replacements = args[2:]
			}
			t.Deprecate = append(t.Deprecate, d)
		case "timeout":
			if len(args) != 2 {
				return nil, d.Errf("tools: timeout <tool glob> <duration>")
			}
			after, err := caddy.ParseDuration(args[1])
			if err != nil || after <= 0 {
				return nil, d.Errf("tools: timeout %s: %q is not a positive duration", args[0], args[1])
			}
			t.Timeouts = append(t.Timeouts, handler.ToolTimeout{Tools: args[0], After: caddy.Duration(after)})
		default:
			return nil, unrecognized(d, "tools", sub)
		}
	}
	if err := t.Validate(); err != nil {
		return nil, errAt(block, fmt.Errorf("tools: %w", err))
	}
	return t, nil
}

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

func noArgs(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
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
	if err := handler.CheckKeyTemplate(v); err != nil {
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
	if err := handler.CheckMethods(methods); err != nil {
		return nil, d.Errf("%s: %v", block, err)
	}
	return methods, nil
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

func nonNegativeInt(d *caddyfile.Dispenser) (int, error) {
	sub := d.Val()
	s, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, d.Errf("%s %q: want a whole number, 0 or more", sub, s)
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
