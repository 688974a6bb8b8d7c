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

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/envelope"
)

// Concurrency bounds the requests in flight to the upstream, with a queue.
type Concurrency struct {
	// Name identifies the guards across config reloads: a reload that keeps
	// the name, key and methods keeps the guards, with the new limits
	// applied, so capacity never doubles while old requests finish. Handlers
	// whose concurrency settings have the same name, key and methods share
	// their guards and so their capacity: give each site its own name when
	// sites must not share. Default: "default".
	Name string `json:"name,omitempty"`

	// Max is the number of requests in flight at once. Required.
	Max int `json:"max"`

	// Queue is the number of requests that may wait, in arrival order, for
	// one in flight to finish. Default: 0, so a request that finds Max in
	// flight is refused with SERVER_BUSY at once.
	Queue int `json:"queue,omitempty"`

	// QueueTimeout is the longest a request waits in the queue before it is
	// refused with SERVER_BUSY. Default: 10s.
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`

	// Key is a placeholder template: each distinct value has its own guard
	// with its own Max and Queue, e.g. {http.mcp.tool} for one per tool.
	// Guards without requests are dropped. Default: one guard.
	Key string `json:"key,omitempty"`

	// Methods are the JSON-RPC methods that take a place. A POST takes one
	// place when any message in it matches, and holds it until its response
	// is completely written (an SSE answer until its end). GET streams never
	// take one. Default: tools/call.
	Methods []string `json:"methods,omitempty"`
}

// guards holds the concurrency guards across config reloads.
var guards = caddy.NewUsagePool()

type guardSet struct {
	*busy.Set
	name string
}

func (guardSet) Destruct() error { return nil }

// concurrencyGuard is a provisioned Concurrency.
type concurrencyGuard struct {
	name    string
	key     string
	methods []string
	limits  busy.Limits
	set     *busy.Set
	poolKey string
}

func newConcurrencyGuard(cfg *Concurrency) (*concurrencyGuard, error) {
	g := &concurrencyGuard{
		name:    cmp.Or(cfg.Name, "default"),
		key:     expandShorthands(cfg.Key),
		methods: cfg.Methods,
		limits: busy.Limits{
			Max:          cfg.Max,
			Queue:        cfg.Queue,
			QueueTimeout: cmp.Or(time.Duration(cfg.QueueTimeout), busy.DefaultQueueTimeout),
		},
	}
	if err := g.limits.Validate(); err != nil {
		return nil, err
	}
	if len(g.methods) == 0 {
		g.methods = []string{"tools/call"}
	}
	g.poolKey = g.name + "\x00" + g.key + "\x00" + strings.Join(g.methods, " ")
	v, loaded, err := guards.LoadOrNew(g.poolKey, func() (caddy.Destructor, error) {
		return guardSet{busy.NewSet(g.limits, busy.SystemClock()), g.name}, nil
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

func (g *concurrencyGuard) release() { _, _ = guards.Delete(g.poolKey) }

// first is the index of the first message that takes a place, or -1.
func (g *concurrencyGuard) first(x *exchange) int {
	for i := range x.msgs {
		m := &x.msgs[i]
		if (m.kind == request || m.kind == notification) && slices.Contains(g.methods, string(m.method)) {
			return i
		}
	}
	return -1
}

// enter takes a place for the exchange, waiting in the queue if it must.
// It returns a nil error and an empty slot when no message takes a place.
func (h *Handler) enter(x *exchange, repl *caddy.Replacer) (busy.Slot, error) {
	g := h.concurrency
	if g == nil {
		return busy.Slot{}, nil
	}
	i := g.first(x)
	if i < 0 {
		return busy.Slot{}, nil
	}
	if g.key != "" {
		x.cur = i
		x.key = repl.ReplaceAll(g.key, "")
		x.cur = 0
	}
	slot, err := g.set.AcquireAt(x.r.Context(), x.key, x.start)
	// An admitted request took its place at its start, or when the queue
	// handed one over: its wait needs no clock reading of its own. A
	// refused one waited until now.
	end := slot.Start()
	if err != nil {
		end = h.now()
	}
	queueWaitObservers.get(x.methodLabel()).Observe(end.Sub(x.start).Seconds())
	return slot, err
}

// shedEnvelope is what the model is told when the guard refused a request.
func (g *concurrencyGuard) shedEnvelope(s *busy.Shed) envelope.Envelope {
	secs := wholeSeconds(s.RetryAfter)
	counts := fmt.Sprintf("%s in progress and %d waiting", countOf(s.Active, g.methods), s.Queued)
	message := fmt.Sprintf("Server busy: %s, the most it takes (%d in progress, %d waiting)", counts, g.limits.Max, g.limits.Queue)
	if s.Reason == busy.WaitExceeded {
		message = fmt.Sprintf("Server busy: %s; this call waited %s in the queue without a free place", counts, formatWindow(g.limits.QueueTimeout))
	}
	return envelope.New(envelope.ServerBusy, message).
		Suggest(fmt.Sprintf("Reduce concurrent calls: send them one at a time, and retry this one in %s.", plural(secs, "second"))).
		Details(
			envelope.Detail{Key: "guard", Value: g.name},
			envelope.Detail{Key: "active", Value: strconv.Itoa(s.Active)},
			envelope.Detail{Key: "queued", Value: strconv.Itoa(s.Queued)},
		).
		RetryAfter(float64(secs)).
		Envelope()
}

// isShed reports whether err is the guard's refusal, as opposed to the
// client going away while it waited.
func isShed(err error) (*busy.Shed, bool) {
	var s *busy.Shed
	if errors.As(err, &s) {
		return s, true
	}
	return nil, false
}
