package credential

import (
	"container/list"
	"sync"
	"time"
)

// cache remembers the tokens obtained, in memory only, each until shortly
// before it expires: at most max of them, and maxBytes counted for them
// all (its value, its key and the bookkeeping: entryBytes); past either
// bound, the least recently used is forgotten. Keys are digests: a caller
// of a long name costs no more than another.
type cache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	bytes    int64
	entries  map[[32]byte]*list.Element
	lru      list.List // of *entry, the most recently used first
}

type entry struct {
	key   [32]byte
	value string
	until time.Time
}

const (
	// entryBytes is what an entry costs beyond its value: the key twice
	// (map and entry), the list element, the map's slot.
	entryBytes = 200
	// margin is how long before its expiry a token is no longer given:
	// a server must not get a token that expires on its way. A token
	// that lives less than twice as long is given for half its life.
	margin = 30 * time.Second
	// unsaid is how long a token whose expiry the issuer did not say is
	// remembered.
	unsaid = time.Minute
)

func newCache(max int, maxBytes int64) *cache {
	return &cache{max: max, maxBytes: maxBytes, entries: make(map[[32]byte]*list.Element)}
}

// get is the token of key, unless it is forgotten or expires soon.
func (c *cache) get(key [32]byte, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return "", false
	}
	e := el.Value.(*entry)
	if !now.Before(e.until) {
		c.drop(el)
		return "", false
	}
	c.lru.MoveToFront(el)
	return e.value, true
}

// put remembers value for key, obtained at now, expiring at expiry.
func (c *cache) put(key [32]byte, value string, expiry, now time.Time) {
	until := now.Add(unsaid)
	if !expiry.IsZero() {
		life := expiry.Sub(now)
		until = expiry.Add(-min(margin, life/2))
	}
	if !until.After(now) {
		return
	}
	size := int64(len(value) + entryBytes)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.drop(el)
	}
	if size > c.maxBytes {
		return
	}
	for len(c.entries) >= c.max || c.bytes+size > c.maxBytes {
		c.drop(c.lru.Back())
	}
	c.entries[key] = c.lru.PushFront(&entry{key: key, value: value, until: until})
	c.bytes += size
}

func (c *cache) drop(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.entries, e.key)
	c.bytes -= int64(len(e.value) + entryBytes)
}

// size is how many tokens are remembered, and the bytes counted for them.
func (c *cache) size() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}
