package oauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// The tokens found valid, remembered so that a client sending the same
// token request after request costs one signature check (about 100 µs)
// per CacheFor rather than one per request. Only valid tokens are kept,
// never beyond their exp (with the leeway), nor beyond CacheFor, so that
// keys withdrawn at the issuer stop counting soon; and at most
// MaxCached of them, none longer than MaxCachedToken, so that memory
// stays bounded whoever sends tokens.
// Tokens are kept by digest, never as they are.

const (
	// CacheFor is the longest a verified token is taken as valid without
	// being checked again.
	CacheFor = 5 * time.Minute
	// MaxCached bounds the tokens remembered, and MaxCachedToken the
	// length of one: with its claims, at most some 20 MB in all.
	MaxCached      = 4096
	MaxCachedToken = 4 << 10
)

type digest [sha256.Size]byte

// cacheKey is the digest of token for resource: a token is valid for one
// resource (its audience).
func cacheKey(token, resource string) digest {
	var buf [2048]byte // most tokens: no allocation
	b := append(append(append(buf[:0], resource...), 0), token...)
	return sha256.Sum256(b)
}

// tokenCache remembers what was decided of tokens, by digest: the
// principal of a valid one, or why one was refused.
type tokenCache struct {
	mu sync.Mutex
	m  map[digest]cached
}

type cached struct {
	p     *Principal // valid: who it speaks for
	err   *Error     // refused: why
	until time.Time
}

// get is what was decided of the token of key, ok when it still holds at
// now.
func (c *tokenCache) get(key digest, now time.Time) (e cached, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok = c.m[key]
	if ok && !now.Before(e.until) {
		delete(c.m, key)
		return cached{}, false
	}
	return e, ok
}

// put remembers e. When full, it first drops the entries that expired,
// and if none did, one entry at random.
func (c *tokenCache) put(key digest, e cached, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[digest]cached)
	}
	if len(c.m) >= MaxCached {
		// A few entries from a random place of the map: the expired ones
		// go, and one at least. Never a scan of the whole map under the
		// lock every request takes.
		seen := 0
		for k, e := range c.m {
			seen++
			if !now.Before(e.until) || len(c.m) >= MaxCached {
				delete(c.m, k)
			}
			if seen == 16 {
				break
			}
		}
	}
	c.m[key] = e
}

// forget drops every token remembered.
func (c *tokenCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

// len is the number of tokens remembered.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
