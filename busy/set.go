package busy

import (
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
)

// shardCount is the number of independently locked parts of a Set, so that
// callers on different keys rarely wait on each other's lock.
const shardCount = 32

// sparesPerShard is the number of idle guards a shard keeps for reuse, so
// that a key going busy does not allocate.
const sparesPerShard = 8

// Set is a family of guards by key, such as one per tool name, all under the
// same Limits. A key's guard is dropped as soon as it has neither holders
// nor waiters, so memory follows the keys that are busy. It is safe for
// concurrent use.
type Set struct {
	seed maphash.Seed
	// mu serializes SetLimits, so that all shards end under the same Limits.
	mu     sync.Mutex
	limits Limits
	shards [shardCount]shard
}

// KeyStats is the snapshot of one key's guard.
type KeyStats struct {
	Key string
	Stats
}

// NewSet returns a Set with no guards, under l, which must be valid.
func NewSet(l Limits) *Set {
	s := &Set{seed: maphash.MakeSeed(), limits: l}
	for i := range s.shards {
		s.shards[i].limits = l
		s.shards[i].guards = make(map[string]*Guard)
	}
	return s
}

// SetLimits applies l, which must be valid, to every key's guard at once, as
// Guard.SetLimits does.
func (s *Set) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = l
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.limits = l
		for _, g := range sh.guards {
			g.setLimits(l)
		}
		sh.mu.Unlock()
	}
}

// Acquire is Guard.Acquire on key's guard.
func (s *Set) Acquire(ctx context.Context, key string) (Slot, error) {
	return s.AcquireAt(ctx, key, time.Now())
}

// AcquireAt is Acquire for a caller that has just read the clock (see
// Guard.AcquireAt).
func (s *Set) AcquireAt(ctx context.Context, key string, now time.Time) (Slot, error) {
	return s.AcquireNAt(ctx, key, now, 1)
}

// AcquireNAt is Guard.AcquireNAt on key's guard.
func (s *Set) AcquireNAt(ctx context.Context, key string, now time.Time, n int) (Slot, error) {
	sh := &s.shards[maphash.String(s.seed, key)%shardCount]
	sh.mu.Lock()
	g := sh.guards[key]
	if g == nil {
		g = sh.open(key)
	}
	return g.acquire(ctx, now, max(n, 1))
}

// Stats returns a snapshot of each busy key's guard, sorted by key. Keys
// are read one shard at a time, not all at one instant.
func (s *Set) Stats() []KeyStats {
	var all []KeyStats
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for key, g := range sh.guards {
			all = append(all, KeyStats{Key: key, Stats: g.stats()})
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b KeyStats) int { return cmp.Compare(a.Key, b.Key) })
	return all
}

// Totals returns the holders and waiters summed over all keys, with Max and
// Queue of the Limits of each key. RecentService is zero: service times are
// kept per key.
func (s *Set) Totals() Stats {
	s.mu.Lock()
	t := Stats{Max: s.limits.Max, Queue: s.limits.Queue}
	s.mu.Unlock()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, g := range sh.guards {
			t.Active += g.active
			t.Queued += g.queue.len
		}
		sh.mu.Unlock()
	}
	return t
}

// shard is one locked part of a Set's guards. Its lock is also the lock of
// each of its guards.
type shard struct {
	mu     sync.Mutex
	limits Limits
	guards map[string]*Guard
	// spares are idle guards for reuse. They remember their key, so that a
	// key that comes and goes gets its own copy of the key back too.
	spares []*Guard
}

// open returns a new guard for key, in the map.
func (sh *shard) open(key string) *Guard {
	g := sh.spare(key)
	if g == nil {
		g = &Guard{mu: &sh.mu, shard: sh}
	}
	if g.key != key {
		// The key may be part of a larger string, such as a request body;
		// a copy keeps the guard from holding on to all of it.
		g.key = strings.Clone(key)
	}
	g.limits = sh.limits
	sh.guards[g.key] = g
	return g
}

// spare takes an idle guard out of the spares, preferably key's.
func (sh *shard) spare(key string) *Guard {
	n := len(sh.spares)
	if n == 0 {
		return nil
	}
	i := slices.IndexFunc(sh.spares, func(g *Guard) bool { return g.key == key })
	if i < 0 {
		i = n - 1
	}
	g := sh.spares[i]
	sh.spares[i] = sh.spares[n-1]
	sh.spares[n-1] = nil
	sh.spares = sh.spares[:n-1]
	return g
}

// drop takes an idle guard out of the map, and keeps it as a spare if there
// is room.
func (sh *shard) drop(g *Guard) {
	delete(sh.guards, g.key)
	if len(sh.spares) < sparesPerShard {
		g.service = service{}
		sh.spares = append(sh.spares, g)
	}
}
