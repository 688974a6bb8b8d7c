package handler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// Admission: the rate limits take tokens, then the concurrency guard takes
// places, each under its own key. A request refused by the guard gives its
// tokens back; a request admitted holds its places until its answer is
// written.

// provisionAdmission sets up the rate limits, on their shared store if
// one is configured, and the concurrency guard.
func (h *Handler) provisionAdmission(ctx caddy.Context) error {
	var err error
	if h.StoreRaw != nil {
		mod, err := ctx.LoadModule(h, "StoreRaw")
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		shared, ok := mod.(SharedStore)
		if !ok {
			return fmt.Errorf("store: module %T is not a rate-limit store", mod)
		}
		h.shared = shared
	}
	for _, name := range sortedNames(h.RateLimits) {
		l, err := newLimit(name, h.RateLimits[name], h.shared, h.logger)
		if err != nil {
			return fmt.Errorf("rate_limit %q: %w", name, err)
		}
		h.limits = append(h.limits, l)
		if err := h.joined.declare("rate_limit", name, l.settings()); err != nil {
			return err
		}
		h.keyInputs.add(l.key.inputs)
	}
	if h.Concurrency != nil {
		if h.concurrency, err = newConcurrencyGuard(h.Concurrency, h.joined, h.logger); err != nil {
			return fmt.Errorf("concurrency: %w", err)
		}
		if h.concurrency.key != nil {
			h.keyInputs.add(h.concurrency.key.inputs)
		}
	}
	return nil
}

// denial is why the rate limits refused a request.
type denial struct {
	limit      *limit
	retryAfter time.Duration
	// cost is the tokens the request needed from the limit.
	cost int
	// unchecked: the limit's shared store could not decide, and refuses
	// what it cannot count.
	unchecked bool
}

// admit takes tokens for every message from every limit that counts it, all
// or nothing, and returns the denial when a limit has too few.
func (h *Handler) admit(x *exchange, repl *caddy.Replacer) *denial {
	if len(h.limits) == 0 {
		return nil
	}
	c := costs{reqs: x.reqBuf[:0], owners: x.ownerBuf[:0]}
	for i := range x.Messages {
		m := &x.Messages[i]
		for _, l := range h.limits {
			if l.applies(m) {
				c.add(l, l.key.eval(x, repl, m))
			}
		}
	}
	if len(c.reqs) == 0 {
		return nil
	}
	denied, d := ratelimit.TakeAll(x.Start, c.reqs)
	if denied < 0 {
		for _, l := range c.owners {
			l.allowed.Inc()
		}
		x.taken = c.reqs
		return nil
	}
	l, r := c.owners[denied], c.reqs[denied]
	l.denied.Inc()
	x.refusal.limit, x.refusal.key = l.name, r.Key
	return &denial{limit: l, retryAfter: d.RetryAfter, cost: r.Cost, unchecked: d.Unchecked}
}

// refund gives back the tokens the exchange took, when it will not run.
func (x *exchange) refund(now time.Time) {
	ratelimit.RefundAll(now, x.taken)
	x.taken = nil
}

// costs are the tokens an exchange takes: one request per limit and key,
// costing one token per message counted, so that a batch takes one token per
// message. A batch of many keys is indexed, so that adding stays constant
// time.
type costs struct {
	reqs   []ratelimit.Request
	owners []*limit
	index  map[costKey]int
}

type costKey struct {
	l   *limit
	key string
}

// indexFrom is the number of requests from which costs are indexed.
const indexFrom = 8

func (c *costs) add(l *limit, key string) {
	if c.index == nil && len(c.reqs) >= indexFrom {
		c.index = make(map[costKey]int, 2*len(c.reqs))
		for i := range c.reqs {
			c.index[costKey{c.owners[i], c.reqs[i].Key}] = i
		}
	}
	if i := c.find(l, key); i >= 0 {
		c.reqs[i].Cost++
		return
	}
	if c.index != nil {
		c.index[costKey{l, key}] = len(c.reqs)
	}
	c.reqs = append(c.reqs, ratelimit.Request{Store: l.store, Key: key, Cost: 1, Limit: l.lim})
	c.owners = append(c.owners, l)
}

// find returns the index of the request for (l, key), or -1.
func (c *costs) find(l *limit, key string) int {
	if c.index != nil {
		if i, ok := c.index[costKey{l, key}]; ok {
			return i
		}
		return -1
	}
	for i := range c.reqs {
		if c.owners[i] == l && c.reqs[i].Key == key {
			return i
		}
	}
	return -1
}

// demand is the places an exchange needs under one key.
type demand struct {
	key string
	n   int
}

// enter takes the exchange's places: one per message the guard counts, all
// or nothing, waiting in the queue if it must. Messages of a batch under
// different keys take places in each key's guard, in the order of the keys,
// so that two batches can never each hold what the other waits for; a
// refusal under one key gives back what the others gave.
func (h *Handler) enter(x *exchange, repl *caddy.Replacer) error {
	g := h.concurrency
	if g == nil {
		return nil
	}
	demands := x.demandBuf[:0]
	for i := range x.Messages {
		m := &x.Messages[i]
		if !g.counts(m) {
			continue
		}
		key := ""
		if g.key != nil {
			key = g.key.eval(x, repl, m)
		}
		demands = append(demands, demand{key: key, n: 1})
	}
	if len(demands) == 0 {
		return nil
	}
	demands = byKey(demands)
	x.slots = x.slotBuf[:0]
	now := x.Start
	var err error
	for _, d := range demands {
		var slot busy.Slot
		if slot, err = g.set.AcquireNAt(x.Request.Context(), d.key, now, d.n); err != nil {
			x.refusal.key, x.refusal.needed = d.key, d.n
			break
		}
		x.slots = append(x.slots, slot)
		now = slot.Start()
	}
	// An admitted request took its places at its start, or when the queue
	// handed them over: its wait needs no clock reading of its own. A
	// refused one waited until now.
	end := now
	if err != nil {
		end = time.Now()
		x.releaseSlots(end)
	}
	queueWaitObservers.get(x.methodLabel()).Observe(end.Sub(x.Start).Seconds())
	return err
}

// byKey sorts demands by key and merges those of one key, in place: sorting
// first keeps a batch of many keys at n log n, where looking each key up
// among the others would be quadratic.
func byKey(demands []demand) []demand {
	slices.SortFunc(demands, func(a, b demand) int { return strings.Compare(a.key, b.key) })
	last := 0
	for _, d := range demands[1:] {
		if d.key == demands[last].key {
			demands[last].n += d.n
		} else {
			last++
			demands[last] = d
		}
	}
	return demands[:last+1]
}

// releaseSlots frees the exchange's places.
func (x *exchange) releaseSlots(now time.Time) {
	for i := range x.slots {
		x.slots[i].ReleaseAt(now)
	}
	x.slots = nil
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
