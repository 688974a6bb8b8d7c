package ratelimit

import (
	"context"
	"hash/maphash"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxKeys is the cap on live buckets that NewMemory applies when
// given none.
const DefaultMaxKeys = 1_000_000

// shardCount is the number of independently locked parts of a Memory, so that
// events for different keys rarely wait on each other.
const shardCount = 64

// Memory is the in-process Store. It is safe for concurrent use.
type Memory struct {
	base     time.Time
	seed     maphash.Seed
	maxKeys  atomic.Int64
	keys     atomic.Int64 // buckets held in the shards
	shards   [shardCount]shard
	overflow overflow
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory that holds at most maxKeys buckets of
// their own, or DefaultMaxKeys when maxKeys <= 0. Keys that arrive at the
// cap share one overflow bucket (see the package documentation).
func NewMemory(maxKeys int) *Memory {
	m := &Memory{base: time.Now(), seed: maphash.MakeSeed()}
	m.SetMaxKeys(maxKeys)
	for i := range m.shards {
		m.shards[i].buckets = make(map[string]bucket)
	}
	return m
}

// SetMaxKeys changes the cap on buckets of their own to maxKeys, or to
// DefaultMaxKeys when maxKeys <= 0. A cap lowered below the buckets held
// keeps them; new keys take from the overflow bucket until enough have
// refilled.
func (m *Memory) SetMaxKeys(maxKeys int) {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	m.maxKeys.Store(int64(maxKeys))
}

// MaxKeys returns the cap on buckets of their own.
func (m *Memory) MaxKeys() int { return int(m.maxKeys.Load()) }

// Overflowing reports whether the overflow bucket is in use: keys arrived at
// the cap, and have not all refilled.
func (m *Memory) Overflowing() bool { return m.overflow.live() }

// Take takes cost tokens from key's bucket at now, if it holds them. A new
// key at the cap takes from the overflow bucket instead.
func (m *Memory) Take(now time.Time, key string, cost int, lim Limit) Decision {
	t := m.since(now)
	s := m.shardOf(key)
	s.mu.Lock()
	b, ok := s.buckets[key]
	if !ok {
		b = newBucket(t, lim)
	}
	b, d := b.take(t, cost, lim)
	switch {
	case b.refilled(t):
		if ok {
			delete(s.buckets, key)
			m.keys.Add(-1)
		}
	case ok:
		s.buckets[key] = b
	case m.reserve():
		s.insert(key, b)
	default:
		s.mu.Unlock()
		return m.overflow.take(t, cost, lim)
	}
	s.mu.Unlock()
	return d
}

// Refund gives back cost tokens taken from key's bucket by an earlier Take.
// A key without a bucket of its own took from the overflow bucket, so that
// one gets them.
func (m *Memory) Refund(now time.Time, key string, cost int, lim Limit) {
	t := m.since(now)
	s := m.shardOf(key)
	s.mu.Lock()
	b, ok := s.buckets[key]
	if !ok {
		s.mu.Unlock()
		m.overflow.refund(t, cost, lim)
		return
	}
	b = b.refund(t, cost, lim)
	if b.refilled(t) {
		delete(s.buckets, key)
		m.keys.Add(-1)
	} else {
		s.buckets[key] = b
	}
	s.mu.Unlock()
}

// Len returns the number of live buckets, the overflow bucket included.
func (m *Memory) Len() int {
	n := int(m.keys.Load())
	if m.overflow.live() {
		n++
	}
	return n
}

// Sweep drops every bucket that has refilled completely at now, and returns
// how many it dropped. It judges each bucket by the Limit of the last Take or
// Refund on it.
func (m *Memory) Sweep(now time.Time) (dropped int) {
	t := m.since(now)
	for i := range m.shards {
		n := m.shards[i].sweep(t)
		m.keys.Add(-int64(n))
		dropped += n
	}
	return dropped + m.overflow.sweep(t)
}

// Run sweeps m at intervals of every, which must be positive, with the time
// from clock (time.Now when nil), and returns when ctx is done. The caller
// runs it in a goroutine. A sweep that panics (or its clock) is given to
// recovered, when it is not nil, and Run goes on: the next sweep runs at
// its time. recovered is called from the deferred call that recovered the
// panic, where the stack is still the panic's.
func (m *Memory) Run(ctx context.Context, every time.Duration, clock func() time.Time, recovered func(v any)) {
	if clock == nil {
		clock = time.Now
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.sweepNow(clock, recovered)
		}
	}
}

// sweepNow sweeps m at clock's time, giving a panic to recovered.
func (m *Memory) sweepNow(clock func() time.Time, recovered func(v any)) {
	if recovered != nil {
		defer func() {
			if v := recover(); v != nil {
				recovered(v)
			}
		}()
	}
	m.Sweep(clock())
}

// since returns now in nanoseconds since m's base. Both times carry a
// monotonic reading when they come from time.Now, so the wall clock being
// set does not move buckets.
func (m *Memory) since(now time.Time) int64 { return int64(now.Sub(m.base)) }

func (m *Memory) shardOf(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)%shardCount]
}

// reserve counts one more bucket against the cap, if there is room.
func (m *Memory) reserve() bool {
	for {
		n := m.keys.Load()
		if n >= m.maxKeys.Load() {
			return false
		}
		if m.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// shard is one locked part of a Memory's buckets.
type shard struct {
	mu      sync.Mutex
	buckets map[string]bucket
	// peak is the most buckets held since the map was last rebuilt. Go maps
	// keep their memory when entries are deleted, so sweep rebuilds a map
	// that has shrunk well below its peak.
	peak int
}

func (s *shard) insert(key string, b bucket) {
	// The key may be part of a larger string, such as a request header; a
	// copy keeps the bucket from holding on to all of it.
	s.buckets[strings.Clone(key)] = b
	s.peak = max(s.peak, len(s.buckets))
}

func (s *shard) sweep(t int64) (dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, b := range s.buckets {
		if b.refilled(t) {
			delete(s.buckets, key)
			dropped++
		}
	}
	if len(s.buckets) < s.peak/4 {
		s.buckets = maps.Collect(maps.All(s.buckets))
		s.peak = len(s.buckets)
	}
	return dropped
}

// overflow is the bucket shared by all keys that arrive when a Memory is at
// its cap.
type overflow struct {
	mu      sync.Mutex
	b       bucket
	holding bool // false when the bucket is full, and so equivalent to none
}

func (o *overflow) take(t int64, cost int, lim Limit) Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.holding {
		o.b = newBucket(t, lim)
	}
	var d Decision
	o.b, d = o.b.take(t, cost, lim)
	o.holding = !o.b.refilled(t)
	return d
}

func (o *overflow) refund(t int64, cost int, lim Limit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holding {
		o.b = o.b.refund(t, cost, lim)
		o.holding = !o.b.refilled(t)
	}
}

func (o *overflow) sweep(t int64) (dropped int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holding && o.b.refilled(t) {
		o.holding = false
		return 1
	}
	return 0
}

func (o *overflow) live() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.holding
}
