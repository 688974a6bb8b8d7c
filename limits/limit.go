package limits

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
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddymcp/caddy-mcp/ratelimit"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// Shared is where the buckets of every limit live when every node of a
// fleet must share them (the handler's store; package redisstore is one).
type Shared interface {
	// Store returns the buckets of the named limit. local is the node's own
	// store for the limit, which the shared store may decide with when it
	// cannot decide itself.
	Store(limit string, local ratelimit.Store) ratelimit.Store
}

// sweepEvery is how often refilled buckets are dropped.
const sweepEvery = 10 * time.Second

// siteSweep is where a panic of sweeping a limit's buckets is recovered
// (package panics).
const siteSweep = "rate_limit_sweep"

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

// Limit is a provisioned Config. Its buckets outlive it, for as long as a
// config uses them; Release lets them go.
type Limit struct {
	name    string
	key     *keys.Key
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

// New provisions the limit name, taking its buckets from those that
// survive config reloads, on shared when it is not nil.
func New(name string, cfg *Config, shared Shared, logger *zap.Logger) (*Limit, error) {
	l, err := configure(name, cfg, logger)
	if err != nil {
		return nil, err
	}
	l.poolKey = name + "\x00" + l.key.Text
	v, loaded, err := buckets.LoadOrNew(l.poolKey, func() (caddy.Destructor, error) {
		ctx, stop := context.WithCancel(context.Background())
		z := &zone{Memory: ratelimit.NewMemory(l.maxKeys), name: name, stop: stop}
		go z.Run(ctx, sweepEvery, nil, func(v any) { panics.Report(logger, siteSweep, v) })
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

// configure is the limit name as cfg configures it, without its buckets.
func configure(name string, cfg *Config, logger *zap.Logger) (*Limit, error) {
	if cfg == nil {
		return nil, errors.New("no settings")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rate, _ := ratelimit.ParseRate(cfg.Rate)
	key, err := keys.NewKey("rate_limit", name, cmp.Or(cfg.Key, DefaultKey), logger)
	if err != nil {
		return nil, err
	}
	l := &Limit{
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
	l.scope = scopeOf(l.key.Text)
	l.deniedMessage, l.details = deniedWords(l)
	l.allowed = decisions.WithLabelValues(name, "allowed")
	l.denied = decisions.WithLabelValues(name, "denied")
	return l, nil
}

// Key is the limit's key template.
func (l *Limit) Key() *keys.Key { return l.key }

// Settings is the limit's configuration in one line, to compare it with
// another handler's use of the same name.
func (l *Limit) Settings() string {
	return fmt.Sprintf("key %s, rate %s, burst %d, methods %v, tools %v, max_keys %d",
		l.key.Text, l.lim.Rate, l.lim.Burst, l.methods, l.toolPatterns, l.maxKeys)
}

// Release lets the limit's buckets go, unless another config uses them.
func (l *Limit) Release() { _, _ = buckets.Delete(l.poolKey) }

// Holders is the number of configs that hold the buckets of the limit
// name keyed by the template key (its shorthands expanded): 2 while a
// reload shares them between the old config and the new, 0 once the last
// one released them.
func Holders(name, key string) int {
	refs, _ := buckets.References(name + "\x00" + key)
	return refs
}

// applies reports whether the limit counts m.
func (l *Limit) applies(m *jsonrpc.Message) bool {
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
func (l *Limit) describe() string {
	return feature.CountOf(l.lim.Rate.Events, l.methods) + " per " + feature.Window(l.lim.Rate.Window)
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

// Status is a limit as the admin API's /mcp/status shows it.
type Status struct {
	Name    string   `json:"name"`
	Key     string   `json:"key"`
	Rate    string   `json:"rate"`
	Burst   int      `json:"burst"`
	Methods []string `json:"methods"`
	Tools   []string `json:"tools,omitempty"`
	MaxKeys int      `json:"max_keys"`
	// Buckets is the number of keys whose bucket is not full, the overflow
	// bucket included, on this node (with a shared store: those it decided
	// itself while the store did not answer).
	Buckets int `json:"buckets"`
	// Overflowing: keys arrived at max_keys and share the overflow bucket.
	Overflowing bool `json:"overflowing"`
}

// Status is the limit as it stands.
func (l *Limit) Status() Status {
	return Status{
		Name:        l.name,
		Key:         l.key.Text,
		Rate:        l.lim.Rate.String(),
		Burst:       l.lim.Burst,
		Methods:     l.methods,
		Tools:       l.toolPatterns,
		MaxKeys:     l.zone.MaxKeys(),
		Buckets:     l.zone.Len(),
		Overflowing: l.zone.Overflowing(),
	}
}
