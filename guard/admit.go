package guard

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/feature"
)

// Admit takes x's places: one per message the guard counts, all or
// nothing, waiting in the queue if it must. Messages of a batch under
// different keys take places in each key's guard, in the order of the
// keys, so that two batches can never each hold what the other waits for;
// a refusal under one key gives back what the others gave.
func (g *Guard) Admit(x *feature.Exchange) (feature.Undo, *feature.Refusal) {
	e := entries.Get().(*entry)
	e.grace = g.cancelGrace
	for i := range x.Messages {
		m := &x.Messages[i]
		if !g.counts(m) {
			continue
		}
		key := ""
		if g.key != nil {
			key = g.key.Eval(x, m)
		}
		e.demands = append(e.demands, demand{key: key, n: 1})
	}
	if len(e.demands) == 0 {
		e.recycle()
		return nil, nil
	}
	e.demands = byKey(e.demands)
	now := x.Start
	var err error
	var refused demand
	for _, d := range e.demands {
		var slot busy.Slot
		if slot, err = g.set.AcquireNAt(x.Request.Context(), d.key, now, d.n); err != nil {
			refused = d
			break
		}
		e.slots = append(e.slots, slot)
		now = slot.Start()
	}
	// An admitted request took its places at its start, or when the queue
	// handed them over: its wait needs no clock reading of its own. A
	// refused one waited until now.
	end := now
	if err != nil {
		end = time.Now()
		e.Undo(end, false)
	}
	queueWaits.Get(x.MethodLabel()).Observe(end.Sub(x.Start).Seconds())
	if err != nil {
		return nil, g.refusal(err, refused)
	}
	return e, nil
}

// refusal is the answer to a request the guard refused for err, under
// the key and for the places of d.
func (g *Guard) refusal(err error, d demand) *feature.Refusal {
	var s *busy.Shed
	if !errors.As(err, &s) {
		// The client went away while it waited: nobody is left to answer.
		return &feature.Refusal{Gone: true, Cause: err}
	}
	env := full(g, s)
	if s.Reason == busy.TooMany {
		env = overMax(g, d.n)
	}
	return &feature.Refusal{
		Envelope: env,
		Status:   http.StatusServiceUnavailable,
		By:       feature.Rule{Kind: "guard", Name: g.name, Key: d.key, Keyed: g.key != nil},
		Cause:    s,
	}
}

// demand is the places a request needs under one key.
type demand struct {
	key string
	n   int
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

// entry is the places one request holds. Entries are recycled, so that
// entering allocates nothing for a request under one key.
type entry struct {
	demands   []demand
	slots     []busy.Slot
	grace     time.Duration
	demandBuf [1]demand
	slotBuf   [1]busy.Slot
}

var entries = sync.Pool{New: func() any {
	e := new(entry)
	e.demands, e.slots = e.demandBuf[:0], e.slotBuf[:0]
	return e
}}

// Undo frees the places, whether the request ran or not.
func (e *entry) Undo(now time.Time, _ bool) {
	for i := range e.slots {
		e.slots[i].ReleaseAt(now)
	}
	e.recycle()
}

// Linger is cancel_grace: how long places stay taken after their client
// left, while the upstream may still run its calls.
func (e *entry) Linger() time.Duration { return e.grace }

// recycle forgets the places and returns e to the pool.
func (e *entry) recycle() {
	clear(e.demandBuf[:])
	clear(e.slotBuf[:])
	*e = entry{demandBuf: e.demandBuf, slotBuf: e.slotBuf}
	e.demands, e.slots = e.demandBuf[:0], e.slotBuf[:0]
	entries.Put(e)
}
