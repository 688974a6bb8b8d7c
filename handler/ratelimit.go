package handler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/ratelimit"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// RateLimit is one named token-bucket limit.
type RateLimit struct {
	// Key is a placeholder template evaluated per message; each distinct
	// value gets its own bucket. Default: {http.vars.client_ip} (written
	// {client_ip} in a Caddyfile), the client's address, which honours the
	// server's trusted_proxies. Any placeholder works, including
	// {http.mcp.tool}, {http.mcp.session_id} and header values; note that a
	// session id alone is chosen by the client and so is spoofable, unless
	// sessions are on (then it is the id in a token the gateway sealed). An
	// unknown placeholder is a configuration error; a request giving twice a
	// header the key reads is refused.
	Key string `json:"key,omitempty"`

	// Rate is how fast tokens refill, as "<events>/<window>": "10/s",
	// "600/1m", "5/30s", "1000/1d". Required.
	Rate string `json:"rate"`

	// Burst is the size of the bucket: how many messages may pass at once
	// after a quiet period. Default: the events of Rate.
	Burst int `json:"burst,omitempty"`

	// Methods are the JSON-RPC methods the limit counts. Default: tools/call.
	Methods []string `json:"methods,omitempty"`

	// Tools narrows which tools/call messages the limit counts: those whose
	// tool name matches one of these globs, where * matches any run of
	// characters. Messages of the other methods are counted whatever their
	// params. Default: every tool.
	Tools []string `json:"tools,omitempty"`

	// MaxKeys caps the number of live buckets. At the cap, a key without a
	// bucket shares one overflow bucket with every other such key, so memory
	// stays bounded and a client spraying keys gets the limit's rate in
	// total, not per key. Buckets that have refilled are dropped, so only
	// keys active within one refill period count. A key value keeps at most
	// 128 bytes (a longer one is kept as its SHA-256 digest), so a bucket
	// takes about 120 bytes with an address as key and at most about 200
	// (ratelimit's BenchmarkMemoryPerBucket*). A reload applies a changed
	// MaxKeys to the live buckets. Default: 1000000.
	MaxKeys int `json:"max_keys,omitempty"`
}

// DefaultKey is the default of RateLimit.Key: the client's address.
const DefaultKey = "{http.vars.client_ip}"

// sweepEvery is how often refilled buckets are dropped.
const sweepEvery = 10 * time.Second

// buckets holds each limit's buckets across config reloads, by name and key
// template. Rate, burst, filters and max_keys are not part of the identity:
// a reload that changes them applies them to the existing buckets.
var buckets = caddy.NewUsagePool()

// zone is the reload-safe part of a limit: its buckets and their sweeper.
type zone struct {
	*ratelimit.Memory
	name string
	stop context.CancelFunc
}

func (z *zone) Destruct() error {
	z.stop()
	return nil
}

// Validate checks the settings as Provision reads them, with the rules the
// Caddyfile applies.
func (cfg *RateLimit) Validate() error {
	var errs []error
	if _, err := ratelimit.ParseRate(cfg.Rate); err != nil {
		errs = append(errs, err)
	}
	if cfg.Burst < 0 {
		errs = append(errs, fmt.Errorf("burst %d: must not be negative (0 means the events of rate)", cfg.Burst))
	}
	if cfg.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("max_keys %d: must not be negative (0 means %d)", cfg.MaxKeys, ratelimit.DefaultMaxKeys))
	}
	if err := checkKeyTemplate(expandShorthands(cmp.Or(cfg.Key, DefaultKey))); err != nil {
		errs = append(errs, fmt.Errorf("key %q: %w", cfg.Key, err))
	}
	if err := CheckMethods(cfg.Methods); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// limit is a provisioned RateLimit.
type limit struct {
	name    string
	key     *keyTemplate
	lim     ratelimit.Limit
	methods []string
	tools   []toolpolicy.Glob
	// toolPatterns are the globs as configured, for the status view.
	toolPatterns []string
	maxKeys      int
	// zone is the node's own buckets; store decides, and is the zone
	// itself unless the handler has a shared store.
	zone    *zone
	store   ratelimit.Store
	poolKey string
	// scope says whose bucket ran dry, for the message the model reads.
	scope string
	// allowed and denied count the limit's decisions.
	allowed, denied prometheus.Counter
	// deniedMessage and details are the fixed parts of the RATE_LIMITED
	// envelope, made once.
	deniedMessage string
	details       []envelope.Detail
}

func newLimit(name string, cfg *RateLimit, shared SharedStore, logger *zap.Logger) (*limit, error) {
	if cfg == nil {
		return nil, errors.New("no settings")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rate, _ := ratelimit.ParseRate(cfg.Rate)
	key, err := newKeyTemplate("rate_limit", name, cmp.Or(cfg.Key, DefaultKey), logger)
	if err != nil {
		return nil, err
	}
	l := &limit{
		name:         name,
		key:          key,
		lim:          ratelimit.Limit{Rate: rate, Burst: cmp.Or(cfg.Burst, rate.Events)},
		methods:      cfg.Methods,
		toolPatterns: cfg.Tools,
		maxKeys:      cmp.Or(cfg.MaxKeys, ratelimit.DefaultMaxKeys),
	}
	if len(l.methods) == 0 {
		l.methods = []string{"tools/call"}
	}
	for _, t := range cfg.Tools {
		l.tools = append(l.tools, toolpolicy.CompileGlob(t))
	}
	l.scope = scopeOf(l.key.text)
	l.deniedMessage, l.details = rateLimitWords(l)
	l.allowed = rateLimitDecisions.WithLabelValues(name, "allowed")
	l.denied = rateLimitDecisions.WithLabelValues(name, "denied")
	l.poolKey = name + "\x00" + l.key.text
	v, loaded, err := buckets.LoadOrNew(l.poolKey, func() (caddy.Destructor, error) {
		ctx, stop := context.WithCancel(context.Background())
		z := &zone{Memory: ratelimit.NewMemory(l.maxKeys), name: name, stop: stop}
		go z.Run(ctx, sweepEvery, nil)
		return z, nil
	})
	if err != nil {
		return nil, err
	}
	l.zone = v.(*zone)
	if loaded {
		l.zone.SetMaxKeys(l.maxKeys)
	}
	l.store = l.zone
	if shared != nil {
		l.store = shared.Store(name, l.zone)
	}
	return l, nil
}

// settings is the limit's configuration in one line, to compare it with
// another handler's use of the same name.
func (l *limit) settings() string {
	return fmt.Sprintf("key %s, rate %s, burst %d, methods %v, tools %v, max_keys %d",
		l.key.text, l.lim.Rate, l.lim.Burst, l.methods, l.toolPatterns, l.maxKeys)
}

func (l *limit) release() { _, _ = buckets.Delete(l.poolKey) }

// applies reports whether the limit counts m.
func (l *limit) applies(m *jsonrpc.Message) bool {
	if m.Kind != jsonrpc.Request && m.Kind != jsonrpc.Notification {
		return false
	}
	if !slices.Contains(l.methods, string(m.Method)) {
		return false
	}
	if len(l.tools) == 0 || string(m.Method) != "tools/call" {
		return true
	}
	if m.Name == nil {
		return false
	}
	for _, g := range l.tools {
		if g.Match(string(m.Name)) {
			return true
		}
	}
	return false
}

// describe is the limit as the model reads it: "10 calls per 1s".
func (l *limit) describe() string {
	return countOf(l.lim.Rate.Events, l.methods) + " per " + formatWindow(l.lim.Rate.Window)
}

func scopeOf(key string) string {
	switch key {
	case DefaultKey, "{http.request.remote.host}", "{http.request.remote}":
		return "this client"
	case "{http.mcp.tool}":
		return "this tool"
	case "{http.mcp.session_id}":
		return "this session"
	}
	if !strings.Contains(key, "{") {
		return "all clients"
	}
	return "this key"
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
