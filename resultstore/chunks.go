package resultstore

import "sync"

// Pages are read one after another, each a small part of a chunk (a
// page of 64 KiB, a chunk of 1 MiB): the chunks opened last are kept, so
// that a chunk is loaded and opened once for the pages it holds, not once
// for each. Only a chunk's bytes are kept, never whether it may be read:
// every Read loads and checks its result's manifest first (owner, expiry,
// deletion), and a chunk, once stored under its random id, never changes.

// cachedBytes bounds the bytes of the chunks kept: four chunks of the
// default size.
const cachedBytes = 4 * DefaultChunk

// chunkCache is the chunks opened last, the oldest forgotten first.
type chunkCache struct {
	mu      sync.Mutex
	entries []cachedChunk // oldest first
	bytes   int
}

type cachedChunk struct {
	id    string
	index int
	plain []byte // read only: Reads copy from it
}

// get is chunk index of result id, if kept.
func (c *chunkCache) get(id string, index int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.index == index && e.id == id {
			return e.plain
		}
	}
	return nil
}

// put keeps plain as chunk index of result id, forgetting the oldest
// chunks past cachedBytes; a chunk larger than that is not kept.
func (c *chunkCache) put(id string, index int, plain []byte) {
	if len(plain) > cachedBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.bytes+len(plain) > cachedBytes {
		c.bytes -= len(c.entries[0].plain)
		c.entries[0] = cachedChunk{}
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, cachedChunk{id: id, index: index, plain: plain})
	c.bytes += len(plain)
}
