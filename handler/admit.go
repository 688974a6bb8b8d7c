package handler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/limits"
)

// Admission: the admitters (the rate limits, package limits) take what a
// request needs, then, once the checks let it pass, the concurrency guard
// takes places, each under its own key. What the admitters took comes
// back, through their Undo, once the request is over: given back when it
// never ran (the guard shed it, its body was refused as it streamed). A
// request admitted holds its places until its answer is written.

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
		l, err := limits.New(name, h.RateLimits[name], h.shared, h.logger)
		if err != nil {
			return fmt.Errorf("rate_limit %q: %w", name, err)
		}
		h.limits = append(h.limits, l)
		if err := h.joined.declare("rate_limit", name, l.Settings()); err != nil {
			return err
		}
		h.keyInputs.Add(l.Key().Inputs)
	}
	if len(h.limits) > 0 {
		h.admitters = append(h.admitters, h.limits)
	}
	if h.Concurrency != nil {
		if h.concurrency, err = newConcurrencyGuard(h.Concurrency, h.joined, h.logger); err != nil {
			return fmt.Errorf("concurrency: %w", err)
		}
		if h.concurrency.key != nil {
			h.keyInputs.Add(h.concurrency.key.Inputs)
		}
	}
	return nil
}

// admit runs the admitters on x, in order, keeping what each took to be
// given back; the first refusal gives back what the ones before it took,
// as for a request that did not run, and answers x.
func (h *Handler) admit(x *exchange) *feature.Refusal {
	if len(h.admitters) == 0 {
		return nil
	}
	fx := x.view()
	for _, a := range h.admitters {
		u, ref := a.Admit(fx)
		if ref != nil {
			x.undo(time.Now(), false)
			x.refusal.Rule = ref.By
			return ref
		}
		if u != nil {
			if x.undos == nil {
				x.undos = x.undoBuf[:0]
			}
			x.undos = append(x.undos, u)
		}
	}
	return nil
}

// undo gives back, once, what the admitters took for x; ran says whether
// x went on to the upstream (feature.Undo).
func (x *exchange) undo(now time.Time, ran bool) {
	for _, u := range x.undos {
		u.Undo(now, ran)
	}
	clear(x.undos)
	x.undos = x.undos[:0]
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
func (h *Handler) enter(x *exchange) error {
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
			key = g.key.Eval(&x.Exchange, m)
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
			x.refusal.Key, x.refusal.needed = d.key, d.n
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
