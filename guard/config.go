package guard

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddyserver/caddy/v2"
)

// Config bounds the requests in flight to the upstream, with a queue: the
// handler's concurrency.
type Config struct {
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
func (cfg *Config) Validate() error {
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

// DefaultCancelGrace is the default of Config.CancelGrace: long
// enough for a server told to stop to answer, short enough that a place
// held for a client that left is soon back.
const DefaultCancelGrace = 5 * time.Second

// listenMethod is MCP 2026-07-28's request for a stream of change
// notifications, in place of the session era's GET stream.
const listenMethod = "subscriptions/listen"
