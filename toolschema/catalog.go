package toolschema

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Bounds of what a Catalog keeps.
const (
	// DefaultMaxBytes is the default bound of a catalog's memory: 128 MiB.
	DefaultMaxBytes = 128 << 20
	// MaxTools bounds a list: a longer one keeps its first MaxTools tools,
	// and is not complete.
	MaxTools = 5000
)

// ListKey names one tool list: the MCP endpoint (host, path, and the
// replica a session is pinned to), and the authorization scope it was
// answered under ("" for a list the server marked cacheScope public).
type ListKey struct {
	Endpoint string
	Scope    string
}

// Catalog keeps the tools the upstreams listed, per ListKey, with each
// tool's compiled inputSchema. It is safe for concurrent use.
//
// What it holds follows the lists, not the callers: a list is kept once
// however many keys were given it (lists are named by a digest of their
// tools), and each compiled schema once however many lists hold it, so a
// key given a list the catalog holds already costs about 140 bytes. An
// answer learned whole is remembered by a digest of its bytes, so that the
// same bytes again are not read again.
//
// Its memory is bounded in bytes: the keys, the lists, their compiled
// schemas (each weighed as it is built, see heapSize) and the pages of
// listings under way. Past the bound, keys are dropped, with the lists
// and schemas no other key holds: first the keys no call has used since
// they were listed (a client that lists under ever new credentials only
// ever evicts such keys), least recently listed first, then the least
// recently used. Keys that calls used keep at most usedShare quarters of
// the bound from newly listed ones, so that lists used long ago do not
// keep every new one out.
type Catalog struct {
	mu        sync.Mutex
	max       int64
	bytes     int64
	endpoints map[string]*endpoint
	keys      int
	lists     map[[32]byte]*list
	answers   map[[32]byte]*answer
	schemas   map[[32]byte]*compiled
	pending   map[*entry]*pending
	// listed are the keys no call has used since they were listed, used
	// those a call has, each most recent first; usedBytes is the part of
	// the bytes held for the used ones (see list.share).
	listed, used queue
	usedBytes    int64
	evictions    uint64
}

// usedShare is the part of the bound kept for the keys calls use, in
// quarters.
const usedShare = 3

// endpoint holds the keys of one endpoint, by scope.
type endpoint struct {
	name   string
	scopes map[string]*entry
}

// entry is what one key was given: the list of its last complete listing
// (its listing under way is in Catalog.pending).
type entry struct {
	ep    *endpoint
	scope string
	list  *list // nil until a listing or a page without its start was learned
	// expires is when ttlMs says the list is stale, in Unix nanoseconds;
	// 0: no ttlMs.
	expires    int64
	prev, next *entry
	// complete: every page of the listing, from the first to the one
	// without nextCursor, was learned, and none was cut at MaxTools.
	complete bool
	// used: a call looked the key up since it was listed.
	used bool
}

// list is a set of tools, sorted by name, shared by every key given the
// same tools with the same schemas.
type list struct {
	sum     [32]byte
	names   []string
	schemas []*compiled
	// answers are the digests of the answers remembered as making the
	// list, the oldest first.
	answers [][32]byte
	// refs are the keys given the list, usedRefs those among them calls
	// used.
	refs, usedRefs int
	// bytes are its own (names, slices); weight adds those of the schemas
	// it brought to the catalog; share is the part of weight counted as
	// used: weight × usedRefs / refs.
	bytes, weight, share int64
}

// answer is what a tools/list result learned whole (one page, no tool
// cut) made: its list, and what else Learn read from it.
type answer struct {
	list   *list
	tools  int
	ttlMs  int64 // -1: none
	public bool
}

// pending gathers the pages of a listing under way; it holds its schemas
// as a list does.
type pending struct {
	tools []tool
	bytes int64
}

type tool struct {
	name   string
	schema *compiled
}

// compiled is a schema and whether it compiled, held while a list or a
// listing under way names it.
type compiled struct {
	sum    [32]byte
	schema *Schema
	err    error
	bytes  int64
	refs   int
}

// weight is what holding cs costs: its heap, and its slot in the
// catalog's map. heapSize counts a quarter more, for the objects a schema
// only points into (a compiled pattern's instructions point into the
// nodes of its parse tree, which stay whole): a pattern weighs up to a
// fifth more than heapSize finds.
func (cs *compiled) weight() int64 {
	return heapSize(cs)*5/4 + slotBytes(cs.sum, cs)
}

// NewCatalog returns an empty catalog bounded to maxBytes (0: the default).
func NewCatalog(maxBytes int64) *Catalog {
	return &Catalog{
		max:       cmp.Or(maxBytes, DefaultMaxBytes),
		endpoints: make(map[string]*endpoint),
		lists:     make(map[[32]byte]*list),
		answers:   make(map[[32]byte]*answer),
		schemas:   make(map[[32]byte]*compiled),
		pending:   make(map[*entry]*pending),
	}
}

// SetMaxBytes changes the bound (0: the default). A smaller bound is met
// at the next Learn, not at once: a config being loaded may set the bound
// several times before its last value.
func (c *Catalog) SetMaxBytes(maxBytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = cmp.Or(maxBytes, DefaultMaxBytes)
}

// Found is what a catalog knows of a tool.
type Found int

const (
	// NoList: no list is known for the key (or it expired): the call
	// passes unchecked.
	NoList Found = iota
	// Unlisted: the list is known but incomplete, and the tool is not in
	// it: the call passes unchecked.
	Unlisted
	// Absent: the list is complete and the tool is not in it.
	Absent
	// BadSchema: the tool's inputSchema does not compile: the call passes
	// unchecked.
	BadSchema
	// Known: the tool and its schema are known.
	Known
)

// Lookup finds a tool's schema under key, then under the key's public
// scope; names are the complete list's tools, sorted, when the tool is
// Absent (shared by every caller: read them, never change them). The key
// it finds counts as used by a call.
//
// A list's ttlMs (MCP 2026-07-28) is a freshness hint for serving a cached
// list, which the gateway never does: it checks arguments against the
// schema the client was last given whatever its age (a changed schema
// comes with a new tools/list, learned as it passes), and refuses a tool
// missing from the list only while the list is fresh.
func (c *Catalog) Lookup(key ListKey, tool string, now time.Time) (s *Schema, found Found, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.find(key)
	if e == nil {
		return nil, NoList, nil
	}
	c.use(e)
	l := e.list
	if l == nil {
		return nil, Unlisted, nil
	}
	if i, ok := slices.BinarySearch(l.names, tool); ok {
		if cs := l.schemas[i]; cs.err == nil {
			return cs.schema, Known, nil
		}
		return nil, BadSchema, nil
	}
	// ttlMs says how long the list stays fresh: past it, a tool missing
	// from it may have been added since.
	if !e.complete || (e.expires != 0 && now.UnixNano() >= e.expires) {
		return nil, Unlisted, nil
	}
	return nil, Absent, l.names
}

// Forget drops the list under key: the server said its tools changed
// (notifications/tools/list_changed), so what the list held may be wrong
// until it is listed again, and calls pass unchecked meanwhile.
func (c *Catalog) Forget(key ListKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ep := c.endpoints[key.Endpoint]; ep != nil {
		if e := ep.scopes[key.Scope]; e != nil {
			c.remove(e)
		}
	}
}

// Names are the tools the list under key holds (or, failing it, the list
// its endpoint marked public), sorted, shared by every caller (read them,
// never change them); nil when none is known.
func (c *Catalog) Names(key ListKey) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.find(key); e != nil && e.list != nil {
		return e.list.names
	}
	return nil
}

// Stats is what a catalog holds.
type Stats struct {
	// MaxBytes is the bound, Bytes what is held.
	MaxBytes int64 `json:"max_size"`
	Bytes    int64 `json:"bytes"`
	// Keys are the endpoints and scopes given a list (or listing one),
	// Lists the distinct lists they were given, Schemas the compiled
	// schemas those hold.
	Keys    int `json:"keys"`
	Lists   int `json:"lists"`
	Schemas int `json:"schemas"`
	// Evictions counts the keys dropped to stay within the bound.
	Evictions uint64 `json:"evictions"`
}

// Stats says what the catalog holds.
func (c *Catalog) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{MaxBytes: c.max, Bytes: c.bytes, Keys: c.keys, Lists: len(c.lists), Schemas: len(c.schemas), Evictions: c.evictions}
}
