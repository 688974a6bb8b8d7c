package session

import (
	"container/heap"
	"github.com/caddyserver/caddy/v2"
	"sync"
	"sync/atomic"
	"time"
)

// A session reopened upstream lives on under a new upstream id, while the
// client goes on sending the token it holds (the Go client refuses a new
// session id). The remap is where this node finds it: each reopened
// token's ref names the upstream and the id that now hold its session.
// It is the node's own: another node that the token reaches finds the old
// session gone, and reopens it once for itself.
const (
	// maxRemapped bounds the sessions a node remaps, and
	// maxRemappedBytes the bytes they take (an upstream's id may be 6
	// KiB); past either, the entries that expire soonest make room. A
	// session that lost its entry is reopened again when its request
	// meets the old session's 404.
	maxRemapped      = 1 << 16
	maxRemappedBytes = 16 << 20
	// remappedOverhead is what an entry takes besides its strings: the
	// entry, its slot in the map and in the heap.
	remappedOverhead = 128
)

// remap is the sessions this node reopened, by their token's ref. It is
// safe for concurrent use.
type remap struct {
	mu    sync.RWMutex
	byRef map[tokenRef]*remapped
	// soonest orders the entries by when their tokens expire, soonest
	// first: those are dropped once expired, and evicted first.
	soonest remapHeap
	bytes   int
	// held is len(byRef), read without the lock by every request of a
	// session: most nodes never reopen one.
	held                 atomic.Int64
	maxEntries, maxBytes int
}

// remapped is where a reopened session lives now.
type remapped struct {
	ref          tokenRef
	upstream, id string
	// expires is when its token stops opening.
	expires time.Time
	index   int // in soonest
}

func (e *remapped) cost() int { return len(e.upstream) + len(e.id) + remappedOverhead }

// remaps holds the node's remap across config reloads: a reload that
// kept sessions would otherwise send each reopened session to the
// upstream session it lost again, and open yet another. One remap serves
// every config: its entries are found by tokens that open, whose nonces
// no two sessions share.
var remaps = caddy.NewUsagePool()

// remapKey is the remap's key in remaps.
const remapKey = "remap"

// takeRemap takes the node's remap, made on first use; releaseRemap gives
// it back, and the last config to give it back lets it go.
func takeRemap() (*remap, error) {
	v, _, err := remaps.LoadOrNew(remapKey, func() (caddy.Destructor, error) {
		return newRemap(maxRemapped, maxRemappedBytes), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*remap), nil
}

func releaseRemap() { _, _ = remaps.Delete(remapKey) }

// Destruct lets the remap go, once no config uses it.
func (m *remap) Destruct() error { return nil }

func newRemap(maxEntries, maxBytes int) *remap {
	return &remap{byRef: make(map[tokenRef]*remapped), maxEntries: maxEntries, maxBytes: maxBytes}
}

// find returns where the session of the token ref names lives now, if it
// was reopened and the token has not expired at now.
func (m *remap) find(ref tokenRef, now time.Time) (upstream, id string, ok bool) {
	if m.held.Load() == 0 {
		return "", "", false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	e := m.byRef[ref]
	if e == nil || now.After(e.expires) {
		return "", "", false
	}
	return e.upstream, e.id, true
}

// keep records that the session of the token ref names lives now in the
// session id of upstream, until the token expires; it replaces what a
// reopening before recorded. One too large to keep at all is not kept,
// and neither is the entry it replaces, which names a session gone.
func (m *remap) keep(ref tokenRef, upstream, id string, expires, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer func() { m.held.Store(int64(len(m.byRef))) }()
	m.dropExpired(now)
	if old := m.byRef[ref]; old != nil {
		m.remove(old)
	}
	e := &remapped{ref: ref, upstream: upstream, id: id, expires: expires}
	if e.cost() > m.maxBytes || m.maxEntries < 1 || !now.Before(expires) {
		return
	}
	for len(m.byRef) >= m.maxEntries || m.bytes+e.cost() > m.maxBytes {
		m.remove(m.soonest[0])
	}
	m.byRef[ref] = e
	m.bytes += e.cost()
	heap.Push(&m.soonest, e)
}

// len is how many sessions are remapped at now.
func (m *remap) len(now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropExpired(now)
	m.held.Store(int64(len(m.byRef)))
	return len(m.byRef)
}

// dropExpired drops the entries whose tokens no longer open at now.
func (m *remap) dropExpired(now time.Time) {
	for len(m.soonest) > 0 && now.After(m.soonest[0].expires) {
		m.remove(m.soonest[0])
	}
}

func (m *remap) remove(e *remapped) {
	heap.Remove(&m.soonest, e.index)
	delete(m.byRef, e.ref)
	m.bytes -= e.cost()
}

// remapHeap is a heap of entries, the soonest to expire on top.
type remapHeap []*remapped

func (h remapHeap) Len() int           { return len(h) }
func (h remapHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h remapHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *remapHeap) Push(x any) {
	e := x.(*remapped)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *remapHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
