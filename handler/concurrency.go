package handler

import (
	"cmp"
	"errors"
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

// Concurrency bounds the requests in flight to the upstream, with a queue.
type Concurrency struct {
	// Name shares the guards: handlers whose concurrency has the same name
	// share their places, across sites and across config reloads, and must
	// then give it the same settings (a config where two handlers give one
	// name different settings is refused). A reload that keeps the name,
	// key and methods keeps the guards and applies changed limits at once,
	// so capacity never doubles while old requests finish. Without a name,
	// a guard is its handler's alone; a reload that keeps its settings keeps
	// its places. Default: none.
	Name string `json:"name,omitempty"`

	// Max is the number of places: messages in flight at once. Required.
	Max int `json:"max"`

	// Queue is the number of requests that may wait, in arrival order, for
	// places to free up. Default: 0, so a request that finds no free place
	// is refused with SERVER_BUSY at once.
	Queue int `json:"queue,omitempty"`

	// QueueTimeout is the longest a request waits in the queue before it is
	// refused with SERVER_BUSY. Default: 10s.
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`

	// CancelGrace bounds how long the places of a request whose client
	// left stay taken. The gateway tells the upstream to stop the
	// request's calls at once, then holds the places while the upstream
	// may still be running them: until it answers, or this long after the
	// client left, when the upstream request is cut and the places come
	// back. Default: 5s.
	CancelGrace caddy.Duration `json:"cancel_grace,omitempty"`

	// Key is a placeholder template: each distinct value has its own guard
	// with its own Max and Queue, e.g. {http.mcp.tool} for one per tool.
	// Guards without requests are dropped. Default: one guard.
	Key string `json:"key,omitempty"`

	// Methods are the JSON-RPC methods that take a place. A POST takes one
	// place per message that matches (a batch of three calls takes three,
	// all or none, since servers run a batch's messages at once), and holds
	// them until its response is completely written (an SSE answer until
	// its end). A batch needing more places than Max is refused. GET
	// streams never take one, nor may subscriptions/listen, the stateless
	// era's stream of notifications. Default: tools/call.
	Methods []string `json:"methods,omitempty"`
}

// Validate checks the settings as Provision reads them, with the rules the
// Caddyfile applies.
func (cfg *Concurrency) Validate() error {
	l := busy.Limits{Max: cfg.Max, Queue: cfg.Queue, QueueTimeout: cmp.Or(time.Duration(cfg.QueueTimeout), busy.DefaultQueueTimeout)}
	errs := []error{l.Validate(), feature.CheckMethods(cfg.Methods)}
	if cfg.CancelGrace < 0 {
		errs = append(errs, fmt.Errorf("cancel_grace %s: must not be negative", time.Duration(cfg.CancelGrace)))
	}
	if slices.Contains(cfg.Methods, listenMethod) {
		errs = append(errs, errors.New("methods: "+listenMethod+" cannot take a place: its answer is a stream that stays open as long as the client listens (MCP 2026-07-28), so each listener would hold a place for good; limit how often it is sent with a rate_limit instead"))
	}
	if err := keys.Check(cfg.Key); err != nil {
		errs = append(errs, fmt.Errorf("key %q: %w", cfg.Key, err))
	}
	return errors.Join(errs...)
}

// DefaultCancelGrace is the default of Concurrency.CancelGrace: long
// enough for a server told to stop to answer, short enough that a place
// held for a client that left is soon back.
const DefaultCancelGrace = 5 * time.Second

// listenMethod is MCP 2026-07-28's request for a stream of change
// notifications, in place of the session era's GET stream.
const listenMethod = "subscriptions/listen"

// guards holds the concurrency guards across config reloads.
var guards = caddy.NewUsagePool()

type guardSet struct {
	*busy.Set
	name string
}

func (guardSet) Destruct() error { return nil }

// unnamedGuard is the name an unnamed guard is shown under, in the status
// view and the metrics.
const unnamedGuard = "default"

// concurrencyGuard is a provisioned Concurrency.
type concurrencyGuard struct {
	name string
	// key is nil for a single guard.
	key     *keys.Key
	methods []string
	limits  busy.Limits
	// cancelGrace is Concurrency.CancelGrace, its default applied.
	cancelGrace time.Duration
	set         *busy.Set
	poolKey     string
}

func newConcurrencyGuard(cfg *Concurrency, ld *load, logger *zap.Logger) (*concurrencyGuard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &concurrencyGuard{
		name:    cmp.Or(cfg.Name, unnamedGuard),
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
	if cfg.Key != "" {
		var err error
		if g.key, err = keys.NewKey("concurrency", g.name, cfg.Key, logger); err != nil {
			return nil, err
		}
	}
	settings := g.settings()
	if cfg.Name != "" {
		if err := ld.declare("concurrency", cfg.Name, settings); err != nil {
			return nil, err
		}
		g.poolKey = "named\x00" + cfg.Name + "\x00" + g.keyText() + "\x00" + strings.Join(g.methods, " ")
	} else {
		g.poolKey = "unnamed\x00" + settings + "\x00" + strconv.Itoa(ld.ordinal(settings))
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

// settings is the guard's configuration in one line.
func (g *concurrencyGuard) settings() string {
	return fmt.Sprintf("max %d, queue %d, queue_timeout %s, cancel_grace %s, key %s, methods %v",
		g.limits.Max, g.limits.Queue, formatWindow(g.limits.QueueTimeout), formatWindow(g.cancelGrace), g.keyText(), g.methods)
}

func (g *concurrencyGuard) keyText() string {
	if g.key == nil {
		return ""
	}
	return g.key.Text
}

func (g *concurrencyGuard) release() { _, _ = guards.Delete(g.poolKey) }

// counts reports whether m takes a place.
func (g *concurrencyGuard) counts(m *jsonrpc.Message) bool {
	return (m.Kind == jsonrpc.Request || m.Kind == jsonrpc.Notification) && slices.Contains(g.methods, string(m.Method))
}
