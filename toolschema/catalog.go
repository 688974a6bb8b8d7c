package toolschema

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// Bounds of what a Catalog keeps. A list beyond MaxTools tools keeps the
// first MaxTools, and is not complete; a compiled schema is kept once
// however many lists name it, and the compiled schemas held are bounded by
// count and by the bytes of their text (a compiled schema takes up to about
// 32 times its text: a 63 KB schema of enums took 2 MB).
const (
	DefaultMaxLists   = 1000
	DefaultMaxSchemas = 10000
	MaxSchemaBytes    = 8 << 20
	MaxTools          = 5000
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
// Memory is bounded: at most maxLists lists (one more evicts an arbitrary
// one) and maxSchemas compiled schemas (shared across lists by content
// hash; one more evicts an arbitrary one, which its lists then compile
// again on their next tools/list).
type Catalog struct {
	mu         sync.Mutex
	lists      map[ListKey]*toolList
	schemas    map[[32]byte]*compiled
	bytes      int // the text of the schemas held
	maxLists   int
	maxSchemas int
}

// toolList is one list: complete once every page of a listing, from the
// first to the one without nextCursor, was learned. A tool names its
// schema by the hash of its text: the schema itself is held by the
// catalog's cache only, so that evicting it frees it.
type toolList struct {
	tools    map[string][32]byte
	complete bool
	expires  time.Time // when ttlMs says it is stale; zero: no ttlMs
	// pending gathers the pages of a listing under way.
	pending map[string][32]byte
}

// compiled is a schema and whether it compiled, and the size of its text.
type compiled struct {
	schema *Schema
	err    error
	size   int
}

// NewCatalog returns an empty catalog with the given bounds (0: the
// defaults).
func NewCatalog(maxLists, maxSchemas int) *Catalog {
	if maxLists <= 0 {
		maxLists = DefaultMaxLists
	}
	if maxSchemas <= 0 {
		maxSchemas = DefaultMaxSchemas
	}
	return &Catalog{lists: make(map[ListKey]*toolList), schemas: make(map[[32]byte]*compiled), maxLists: maxLists, maxSchemas: maxSchemas}
}

// listResult is what a tools/list result holds that the catalog reads.
type listResult struct {
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	NextCursor *string `json:"nextCursor"`
	TTLMs      *int64  `json:"ttlMs"`
	CacheScope string  `json:"cacheScope"`
}

// Page is what Learn made of one tools/list result.
type Page struct {
	// Tools is how many tools the page held.
	Tools int
	// Bad are the tools whose inputSchema does not compile, with why.
	Bad map[string]error
	// Complete: the page ended a listing that began with its first page.
	Complete bool
}

// Learn records one page of tools/list: result is the JSON-RPC result,
// first says the request had no cursor (a new listing begins), now is the
// time it was answered. A result that is not a tools/list result is
// ignored.
func (c *Catalog) Learn(key ListKey, result []byte, first bool, now time.Time) (Page, error) {
	var res listResult
	if err := json.Unmarshal(result, &res); err != nil {
		return Page{}, err
	}
	if res.CacheScope == "public" {
		key.Scope = ""
	}
	page := Page{Tools: len(res.Tools)}
	tools := make(map[string][32]byte, min(len(res.Tools), MaxTools))
	truncated := len(res.Tools) > MaxTools
	for _, t := range res.Tools[:min(len(res.Tools), MaxTools)] {
		if t.Name == "" {
			continue
		}
		sum, cs, fresh := c.compile(t.InputSchema)
		if cs.err != nil && fresh {
			if page.Bad == nil {
				page.Bad = make(map[string]error)
			}
			page.Bad[t.Name] = cs.err
		}
		tools[t.Name] = sum
	}
	last := res.NextCursor == nil || *res.NextCursor == ""

	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lists[key]
	if l == nil {
		if len(c.lists) >= c.maxLists {
			for k := range c.lists {
				delete(c.lists, k)
				break
			}
		}
		l = &toolList{tools: map[string][32]byte{}}
		c.lists[key] = l
	}
	switch {
	case first && last:
		l.tools, l.complete, l.pending = tools, true, nil
	case first:
		l.pending = tools
	case l.pending != nil:
		for name, sum := range tools {
			if len(l.pending) < MaxTools {
				l.pending[name] = sum
			} else {
				truncated = true
			}
		}
		if last {
			l.tools, l.complete, l.pending = l.pending, true, nil
		}
	default:
		// A page of a listing whose start this gateway did not see: its
		// tools are known, the list is not complete.
		for name, sum := range tools {
			if len(l.tools) < MaxTools {
				l.tools[name] = sum
			}
		}
		l.complete = false
	}
	if truncated {
		l.complete = false // a tool beyond the bound is not absent
	}
	l.expires = time.Time{}
	if res.TTLMs != nil && *res.TTLMs >= 0 {
		l.expires = now.Add(time.Duration(*res.TTLMs) * time.Millisecond)
	}
	page.Complete = l.complete && l.pending == nil
	return page, nil
}

// compile returns the hash of raw and its compiled schema, from the cache
// when it holds the same bytes; fresh says it was compiled now.
func (c *Catalog) compile(raw []byte) (sum [32]byte, cs *compiled, fresh bool) {
	sum = sha256.Sum256(raw)
	c.mu.Lock()
	cs, ok := c.schemas[sum]
	c.mu.Unlock()
	if ok {
		return sum, cs, false
	}
	s, err := Compile(raw)
	cs = &compiled{schema: s, err: err, size: len(raw)}
	c.mu.Lock()
	for len(c.schemas) > 0 && (len(c.schemas) >= c.maxSchemas || c.bytes+cs.size > MaxSchemaBytes) {
		for k, old := range c.schemas {
			delete(c.schemas, k)
			c.bytes -= old.size
			break
		}
	}
	c.schemas[sum] = cs
	c.bytes += cs.size
	c.mu.Unlock()
	return sum, cs, true
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
// scope; names are the complete list's tools when the tool is Absent.
//
// A list's ttlMs (MCP 2026-07-28) is a freshness hint for serving a cached
// list, which the gateway never does: it checks arguments against the
// schema the client was last given whatever its age (a changed schema
// comes with a new tools/list, learned as it passes), and refuses a tool
// missing from the list only while the list is fresh.
func (c *Catalog) Lookup(key ListKey, tool string, now time.Time) (s *Schema, found Found, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range []ListKey{key, {Endpoint: key.Endpoint}} {
		l := c.lists[k]
		if l == nil {
			continue
		}
		if sum, ok := l.tools[tool]; ok {
			cs, held := c.schemas[sum]
			switch {
			case !held:
				return nil, Unlisted, nil // evicted: unchecked until listed again
			case cs.err != nil:
				return nil, BadSchema, nil
			}
			return cs.schema, Known, nil
		}
		// ttlMs says how long the list stays fresh: past it, a tool
		// missing from it may have been added since.
		if !l.complete || (!l.expires.IsZero() && !now.Before(l.expires)) {
			return nil, Unlisted, nil
		}
		names = make([]string, 0, len(l.tools))
		for name := range l.tools {
			names = append(names, name)
		}
		slices.Sort(names)
		return nil, Absent, names
	}
	return nil, NoList, nil
}

// Forget drops the list under key: the server said its tools changed
// (notifications/tools/list_changed), so what the list held may be wrong
// until it is listed again, and calls pass unchecked meanwhile.
func (c *Catalog) Forget(key ListKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lists, key)
}

// Len is how many lists and compiled schemas the catalog holds.
func (c *Catalog) Len() (lists, schemas int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lists), len(c.schemas)
}

// Names are the tools the list under key holds (or, failing it, the list
// its endpoint marked public), sorted; nil when none is known.
func (c *Catalog) Names(key ListKey) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range []ListKey{key, {Endpoint: key.Endpoint}} {
		if l := c.lists[k]; l != nil {
			names := make([]string, 0, len(l.tools))
			for name := range l.tools {
				names = append(names, name)
			}
			slices.Sort(names)
			return names
		}
	}
	return nil
}
