package oauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// The tokens found valid, remembered so that a client sending the same
// token request after request costs one signature check (about 100 µs,
// and more the longer its claims) per CacheFor rather than one per
// request. Only valid tokens are kept, never beyond their exp (with the
// leeway), nor beyond CacheFor, so that keys withdrawn at the issuer stop
// counting soon. Any token is remembered whatever its length (within
// MaxTokenSize): what an entry costs is counted by what it holds (the
// claims kept with its principal), and the entries' sum is held to
// MaxCachedBytes, their number to MaxCached, so that memory stays bounded
// whoever sends tokens. Tokens are kept by digest, never as they are.

const (
	// CacheFor is the longest a verified token is taken as valid without
	// being checked again.
	CacheFor = 5 * time.Minute
	// MaxCached bounds the tokens remembered, and MaxCachedBytes the
	// bytes their entries count: a token of a few hundred bytes counts
	// some 2 KiB, one of 16 KiB some 20 KiB.
	MaxCached      = 4096
	MaxCachedBytes = 16 << 20
)

// What an entry counts beyond its principal's strings and claims: its
// digest and its place in the map, the principal and its view (entryBytes);
// a claim's place in the claims map and the allocator's rounding of a
// small name and value (claimBytes).
const (
	entryBytes = 512
	claimBytes = 128
)

type digest [sha256.Size]byte

// cacheKey is the digest of token for resource: a token is valid for one
// resource (its audience).
func cacheKey(token, resource string) digest {
	var buf [2048]byte // most tokens: no allocation
	if len(resource)+1+len(token) <= len(buf) {
		return sha256.Sum256(append(append(append(buf[:0], resource...), 0), token...))
	}
	// A longer token is digested a piece at a time through buf rather
	// than copied whole, and its digest stands for it after another
	// separator (a URL holds no control byte): no token of the short form
	// spells the key of a long one.
	h := sha256.New()
	for rest := token; len(rest) > 0; {
		n := copy(buf[:], rest)
		h.Write(buf[:n])
		rest = rest[n:]
	}
	var long digest
	h.Sum(long[:0])
	return sha256.Sum256(append(append(append(buf[:0], resource...), 1), long[:]...))
}

// tokenCache remembers what was decided of tokens, by digest: the
// principal of a valid one, or why one was refused.
type tokenCache struct {
	mu sync.Mutex
	m  map[digest]cached
	// bytes are what the entries of m count.
	bytes int
}

type cached struct {
	p     *Principal // valid: who it speaks for
	err   *Error     // refused: why
	until time.Time
}

// size is what e counts against MaxCachedBytes.
func (e *cached) size() int {
	if e.p == nil {
		return entryBytes
	}
	return entryBytes + e.p.held
}

// get is what was decided of the token of key, ok when it still holds at
// now.
func (c *tokenCache) get(key digest, now time.Time) (e cached, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok = c.m[key]
	if ok && !now.Before(e.until) {
		c.drop(key, &e)
		return cached{}, false
	}
	return e, ok
}

// put remembers e. When there is no room for it, it first drops the
// entries that expired, and then entries at random until there is.
func (c *tokenCache) put(key digest, e cached, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[digest]cached)
	}
	if old, ok := c.m[key]; ok {
		c.drop(key, &old)
	}
	size := e.size()
	if c.full(size) {
		// Entries from a random place of the map: the expired ones among
		// the first few go, and as many as it takes to make room. Never a
		// scan of the whole map under the lock every request takes.
		seen := 0
		for k, old := range c.m {
			seen++
			if !now.Before(old.until) || c.full(size) {
				c.drop(k, &old)
			}
			if seen >= 16 && !c.full(size) {
				break
			}
		}
	}
	c.m[key] = e
	c.bytes += size
}

// full reports whether an entry of size bytes finds no room.
func (c *tokenCache) full(size int) bool {
	return len(c.m) >= MaxCached || c.bytes+size > MaxCachedBytes
}

func (c *tokenCache) drop(key digest, e *cached) {
	delete(c.m, key)
	c.bytes -= e.size()
}

// forget drops every token remembered.
func (c *tokenCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.bytes = 0
}

// len is the number of tokens remembered.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
