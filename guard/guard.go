// Package guard is the concurrency guard: a bounded number of places for
// the calls in flight to the upstream, with a bounded queue, one guard per
// key. As a feature.Admitter of the entry phase it takes a request's
// places once the checks let it pass, all or nothing, waiting in the queue
// if it must, and refuses it with SERVER_BUSY when it cannot; the places
// come back through the Undo it returns, which lingers for cancel_grace
// after a client that left (feature.Lingering).
package guard

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/keys"
)

// Load is what a guard needs of the config being loaded: named guards
// are shared by every handler of a config, which must configure them
// alike, and unnamed ones with the same settings are told apart by their
// order.
type Load interface {
	// Declare records that a handler gives the guard name these
	// settings, and refuses settings that differ from another handler's.
	Declare(kind, name, settings string) error
	// Ordinal numbers the unnamed guards of one config with the same
	// settings, in provisioning order.
	Ordinal(settings string) int
}

// guards holds the guards' places across config reloads.
var guards = caddy.NewUsagePool()

type guardSet struct {
	*busy.Set
	name string
}

func (guardSet) Destruct() error { return nil }

// unnamed is the name an unnamed guard is shown under, in the status view
// and the metrics.
const unnamed = "default"

// Guard is a provisioned Config.
type Guard struct {
	name string
	// key is nil for a single guard.
	key     *keys.Key
	methods []string
	limits  busy.Limits
	// cancelGrace is Config.CancelGrace, its default applied.
	cancelGrace time.Duration
	set         *busy.Set
	poolKey     string
}

// New provisions a guard, taking its places from those that survive config
// reloads.
func New(cfg *Config, ld Load, logger *zap.Logger) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := configure(cfg)
	if cfg.Key != "" {
		var err error
		if g.key, err = keys.NewKey("concurrency", g.name, cfg.Key, logger); err != nil {
			return nil, err
		}
	}
	settings := g.Settings()
	if cfg.Name != "" {
		if err := ld.Declare("concurrency", cfg.Name, settings); err != nil {
			return nil, err
		}
		g.poolKey = "named\x00" + cfg.Name + "\x00" + g.keyText() + "\x00" + strings.Join(g.methods, " ")
	} else {
		g.poolKey = "unnamed\x00" + settings + "\x00" + strconv.Itoa(ld.Ordinal(settings))
	}
	v, loaded, err := guards.LoadOrNew(g.poolKey, func() (caddy.Destructor, error) {
		return guardSet{busy.NewSet(g.limits), g.name}, nil
	})
	if err != nil {
		return nil, err
	}
	g.set = v.(guardSet).Set
	if loaded {
		g.set.SetLimits(g.limits)
	}
	return g, nil
}

// configure is the guard cfg configures, without its key and places.
func configure(cfg *Config) *Guard {
	g := &Guard{
		name:    cmp.Or(cfg.Name, unnamed),
		methods: cfg.Methods,
		limits: busy.Limits{
			Max:          cfg.Max,
			Queue:        cfg.Queue,
			QueueTimeout: cmp.Or(time.Duration(cfg.QueueTimeout), busy.DefaultQueueTimeout),
		},
		cancelGrace: cmp.Or(time.Duration(cfg.CancelGrace), DefaultCancelGrace),
	}
	if len(g.methods) == 0 {
		g.methods = []string{"tools/call"}
	}
	return g
}

// Settings is the guard's configuration in one line.
func (g *Guard) Settings() string {
	return fmt.Sprintf("max %d, queue %d, queue_timeout %s, cancel_grace %s, key %s, methods %v",
		g.limits.Max, g.limits.Queue, feature.Window(g.limits.QueueTimeout), feature.Window(g.cancelGrace), g.keyText(), g.methods)
}

func (g *Guard) keyText() string {
	if g.key == nil {
		return ""
	}
	return g.key.Text
}

// Key is the guard's key template, nil for a single guard.
func (g *Guard) Key() *keys.Key { return g.key }

// Places are the guard's places, by key.
func (g *Guard) Places() *busy.Set { return g.set }

// Release lets the guard's places go, unless another config uses them.
func (g *Guard) Release() { _, _ = guards.Delete(g.poolKey) }

// ReadsWholeBody is true: a place is taken once the body is read, never on
// its head, or a client could trickle a body while holding one
// (feature.WholeBody).
func (g *Guard) ReadsWholeBody() bool { return true }

// counts reports whether m takes a place.
func (g *Guard) counts(m *jsonrpc.Message) bool {
	return (m.Kind == jsonrpc.Request || m.Kind == jsonrpc.Notification) && slices.Contains(g.methods, string(m.Method))
}
