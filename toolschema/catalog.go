package toolschema

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"
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

// listResult is what a tools/list result holds that the catalog reads.
type listResult struct {
	Tools      []listedTool `json:"tools"`
	NextCursor *string      `json:"nextCursor"`
	TTLMs      *int64       `json:"ttlMs"`
	CacheScope string       `json:"cacheScope"`
}

type listedTool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Page is what Learn made of one tools/list result.
type Page struct {
	// Tools is how many tools the page held.
	Tools int
	// Bad are the tools whose inputSchema does not compile, with why (the
	// first tool of each such schema, when it was compiled).
	Bad map[string]error
	// Complete: the page ended a listing that began with its first page.
	Complete bool
	// Dropped: the list (or the listing under way) takes more than the
	// catalog's bound, and is not kept: its calls pass unchecked.
	Dropped bool
}

// Learn records one page of tools/list: result is the JSON-RPC result,
// first says the request had no cursor (a new listing begins), now is the
// time it was answered. A result that is not a tools/list result is
// ignored.
func (c *Catalog) Learn(key ListKey, result []byte, first bool, now time.Time) (Page, error) {
	var whole [32]byte
	if first {
		whole = sha256.Sum256(result)
		if page, ok := c.relearn(key, whole, now); ok {
			return page, nil
		}
	}
	var res listResult
	if err := json.Unmarshal(result, &res); err != nil {
		return Page{}, err
	}
	if res.CacheScope == "public" {
		key.Scope = ""
	}
	page := Page{Tools: len(res.Tools)}
	truncated := len(res.Tools) > MaxTools
	res.Tools = res.Tools[:min(len(res.Tools), MaxTools)]
	sums := make([][32]byte, len(res.Tools))
	for i, t := range res.Tools {
		sums[i] = sha256.Sum256(t.InputSchema)
	}
	fresh := c.compileMissing(res.Tools, sums, &page)

	c.mu.Lock()
	defer c.mu.Unlock()
	tools := make([]tool, 0, len(res.Tools))
	for i, t := range res.Tools {
		if t.Name == "" {
			continue
		}
		cs := c.schemas[sums[i]]
		if cs == nil {
			cs = fresh[sums[i]]
		}
		tools = append(tools, tool{t.Name, cs})
	}
	e := c.enter(key)
	last := res.NextCursor == nil || *res.NextCursor == ""
	switch p := c.pending[e]; {
	case first && last:
		c.dropPending(e)
		c.setList(e, c.intern(tools))
		e.complete = true
		if !truncated {
			c.remember(whole, e.list, &res)
		}
	case first:
		c.dropPending(e)
		c.addPending(e, tools)
	case p != nil:
		if len(p.tools)+len(tools) > MaxTools {
			truncated = true
		}
		c.addPending(e, tools)
		if last {
			tools := p.tools
			c.dropPending(e) // its schemas are held again by the list
			c.setList(e, c.intern(tools))
			e.complete = true
		}
	default:
		// A page of a listing whose start this gateway did not see: its
		// tools are known, the list is not complete.
		if e.list != nil {
			tools = append(e.list.tools(), tools...)
		}
		c.setList(e, c.intern(tools[:min(len(tools), MaxTools)]))
		e.complete = false
	}
	if truncated {
		e.complete = false // a tool beyond the bound is not absent
	}
	e.expires = 0
	if res.TTLMs != nil && *res.TTLMs >= 0 {
		e.expires = now.Add(time.Duration(*res.TTLMs) * time.Millisecond).UnixNano()
	}
	page.Complete = e.complete && c.pending[e] == nil
	page.Dropped = c.settle(e)
	page.Complete = page.Complete && !page.Dropped
	return page, nil
}

// relearn learns again an answer learned whole before, from its digest.
func (c *Catalog) relearn(key ListKey, whole [32]byte, now time.Time) (Page, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.answers[whole]
	if a == nil {
		return Page{}, false
	}
	if a.public {
		key.Scope = ""
	}
	e := c.enter(key)
	c.dropPending(e)
	c.setList(e, a.list)
	e.complete, e.expires = true, 0
	if a.ttlMs >= 0 {
		e.expires = now.Add(time.Duration(a.ttlMs) * time.Millisecond).UnixNano()
	}
	dropped := c.settle(e)
	return Page{Tools: a.tools, Complete: !dropped, Dropped: dropped}, true
}

// maxAnswers bounds the answers a list remembers (answers that differ
// only in what the catalog does not keep, such as descriptions, make the
// same list).
const maxAnswers = 8

// remember keeps the digest of an answer learned whole, and what it made:
// l, and res's other members. A list remembers its last maxAnswers.
func (c *Catalog) remember(whole [32]byte, l *list, res *listResult) {
	if c.answers[whole] != nil {
		return
	}
	if len(l.answers) == maxAnswers {
		c.forgetAnswer(l)
	}
	a := &answer{list: l, tools: len(res.Tools), ttlMs: -1, public: res.CacheScope == "public"}
	if res.TTLMs != nil && *res.TTLMs >= 0 {
		a.ttlMs = *res.TTLMs
	}
	c.answers[whole] = a
	l.answers = append(l.answers, whole)
	c.bytes += answerBytes
}

// forgetAnswer drops the oldest answer l remembers.
func (c *Catalog) forgetAnswer(l *list) {
	delete(c.answers, l.answers[0])
	l.answers = slices.Delete(l.answers, 0, 1)
	c.bytes -= answerBytes
}

// answerBytes is what remembering an answer costs: the answer, its slot,
// and its digest in its list's.
var answerBytes = allocated(int(unsafe.Sizeof(answer{}))) + slotBytes([32]byte{}, (*answer)(nil)) + allocated(maxAnswers*32)/maxAnswers

// compileMissing compiles the schemas the catalog does not hold, outside
// its lock, each once, and reports those that do not compile in page.
func (c *Catalog) compileMissing(tools []listedTool, sums [][32]byte, page *Page) map[[32]byte]*compiled {
	c.mu.Lock()
	var missing []int
	seen := make(map[[32]byte]bool)
	for i, t := range tools {
		if t.Name != "" && c.schemas[sums[i]] == nil && !seen[sums[i]] {
			seen[sums[i]] = true
			missing = append(missing, i)
		}
	}
	c.mu.Unlock()
	fresh := make(map[[32]byte]*compiled, len(missing))
	for _, i := range missing {
		s, err := Compile(tools[i].InputSchema)
		cs := &compiled{sum: sums[i], schema: s, err: err}
		cs.bytes = cs.weight()
		fresh[sums[i]] = cs
		if err != nil {
			if page.Bad == nil {
				page.Bad = make(map[string]error)
			}
			page.Bad[tools[i].Name] = err
		}
	}
	return fresh
}

// enter returns the key's entry, a new one when it has none, most
// recently listed first in its queue.
func (c *Catalog) enter(key ListKey) *entry {
	ep := c.endpoints[key.Endpoint]
	if ep == nil {
		ep = &endpoint{name: key.Endpoint, scopes: make(map[string]*entry)}
		c.endpoints[key.Endpoint] = ep
		c.bytes += endpointBytes(ep.name)
	}
	if e := ep.scopes[key.Scope]; e != nil {
		c.queueOf(e).toFront(e)
		return e
	}
	e := &entry{ep: ep, scope: key.Scope}
	ep.scopes[key.Scope] = e
	c.keys++
	c.bytes += entryBytes(e.scope)
	c.listed.pushFront(e)
	return e
}

// setList gives e the list l.
func (c *Catalog) setList(e *entry, l *list) {
	if e.list == l {
		return
	}
	c.detach(e)
	e.list = l
	l.refs++
	if e.used {
		l.usedRefs++
	}
	c.reshare(l)
}

// intern returns the list of these tools (the last of a name kept), the
// one held when another key was given the same, holding it when it is
// new. It sorts tools in place.
func (c *Catalog) intern(tools []tool) *list {
	slices.SortStableFunc(tools, func(a, b tool) int { return strings.Compare(a.name, b.name) })
	named := tools[:0]
	for i, t := range tools {
		if i+1 == len(tools) || tools[i+1].name != t.name {
			named = append(named, t)
		}
	}
	tools = named
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	size := 0
	for _, t := range tools {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(t.name)))])
		h.Write([]byte(t.name))
		h.Write(t.schema.sum[:])
		size += len(t.name)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if l := c.lists[sum]; l != nil {
		return l
	}
	// The names in one string: a list keeps no copy of the answer it was
	// read from, and no object per name.
	var all strings.Builder
	all.Grow(size)
	for _, t := range tools {
		all.WriteString(t.name)
	}
	text := all.String()
	l := &list{sum: sum, names: make([]string, len(tools)), schemas: make([]*compiled, len(tools))}
	for i, t := range tools {
		l.names[i], text = text[:len(t.name)], text[len(t.name):]
		l.schemas[i] = t.schema
		if t.schema.refs == 0 {
			l.weight += t.schema.bytes // the schemas it brought
		}
		c.hold(t.schema)
	}
	l.bytes = allocated(int(unsafe.Sizeof(*l))) + allocated(size) + slotBytes(sum, l) +
		allocated(len(tools)*int(unsafe.Sizeof(""))) + allocated(len(tools)*int(unsafe.Sizeof((*compiled)(nil))))
	l.weight += l.bytes
	c.lists[sum] = l
	c.bytes += l.bytes
	return l
}

// tools are the list's tools, in a slice of their own.
func (l *list) tools() []tool {
	out := make([]tool, len(l.names))
	for i, name := range l.names {
		out[i] = tool{name, l.schemas[i]}
	}
	return out
}

// detach takes e's list from it, dropping the list when no other key
// holds it.
func (c *Catalog) detach(e *entry) {
	l := e.list
	if l == nil {
		return
	}
	e.list = nil
	l.refs--
	if e.used {
		l.usedRefs--
	}
	c.reshare(l)
	if l.refs > 0 {
		return
	}
	for len(l.answers) > 0 {
		c.forgetAnswer(l)
	}
	delete(c.lists, l.sum)
	c.bytes -= l.bytes
	for _, cs := range l.schemas {
		c.release(cs)
	}
}

// reshare counts again the part of l's weight held for used keys.
func (c *Catalog) reshare(l *list) {
	c.usedBytes -= l.share
	l.share = 0
	if l.refs > 0 {
		l.share = l.weight * int64(l.usedRefs) / int64(l.refs)
	}
	c.usedBytes += l.share
}

// hold counts one more holder of cs, keeping it when it is new.
func (c *Catalog) hold(cs *compiled) {
	if cs.refs == 0 {
		c.schemas[cs.sum] = cs
		c.bytes += cs.bytes
	}
	cs.refs++
}

// release counts one holder of cs less, dropping it with the last.
func (c *Catalog) release(cs *compiled) {
	if cs.refs--; cs.refs == 0 {
		delete(c.schemas, cs.sum)
		c.bytes -= cs.bytes
	}
}

// addPending adds tools to e's listing under way (starting one), up to
// MaxTools.
func (c *Catalog) addPending(e *entry, tools []tool) {
	p := c.pending[e]
	if p == nil {
		p = &pending{bytes: allocated(int(unsafe.Sizeof(pending{}))) + slotBytes(e, p)}
		c.pending[e] = p
		c.bytes += p.bytes
	}
	tools = tools[:min(len(tools), MaxTools-len(p.tools))]
	before := allocated(cap(p.tools) * int(unsafe.Sizeof(tool{})))
	p.tools = append(p.tools, tools...)
	grown := allocated(cap(p.tools)*int(unsafe.Sizeof(tool{}))) - before
	for _, t := range tools {
		c.hold(t.schema)
		grown += allocated(len(t.name))
	}
	p.bytes += grown
	c.bytes += grown
}

// dropPending forgets e's listing under way.
func (c *Catalog) dropPending(e *entry) {
	p := c.pending[e]
	if p == nil {
		return
	}
	delete(c.pending, e)
	c.bytes -= p.bytes
	for _, t := range p.tools {
		c.release(t.schema)
	}
}

// settle brings the catalog within its bound after e was learned, and
// reports whether e itself was dropped: when it holds more than the bound
// on its own, it goes first, rather than evict every other key in vain.
func (c *Catalog) settle(e *entry) (dropped bool) {
	if c.alone(e) > c.max {
		c.evict(e)
		dropped = true
	}
	for c.bytes > c.max {
		old := cmp.Or(c.listed.back, c.used.back)
		if old == nil {
			break
		}
		dropped = dropped || old == e
		c.evict(old)
	}
	return dropped
}

// alone is about what e holds that no other key does: what evicting it
// gives back.
func (c *Catalog) alone(e *entry) int64 {
	n := entryBytes(e.scope)
	if e.list != nil && e.list.refs == 1 {
		n += e.list.weight
	}
	if p := c.pending[e]; p != nil {
		n += p.bytes
		seen := make(map[*compiled]bool)
		for _, t := range p.tools {
			if !seen[t.schema] {
				seen[t.schema] = true
				n += t.schema.bytes
			}
		}
	}
	return n
}

// evict drops e, counted as an eviction.
func (c *Catalog) evict(e *entry) {
	c.remove(e)
	c.evictions++
}

// remove drops e, and what only it held.
func (c *Catalog) remove(e *entry) {
	c.queueOf(e).remove(e)
	c.unuse(e)
	c.detach(e)
	c.dropPending(e)
	delete(e.ep.scopes, e.scope)
	c.keys--
	c.bytes -= entryBytes(e.scope)
	if len(e.ep.scopes) == 0 {
		delete(c.endpoints, e.ep.name)
		c.bytes -= endpointBytes(e.ep.name)
	}
}

// use marks e as used by a call, most recently.
func (c *Catalog) use(e *entry) {
	if e.used {
		c.used.toFront(e)
		return
	}
	c.listed.remove(e)
	c.used.pushFront(e)
	e.used = true
	c.usedBytes += entryBytes(e.scope)
	if e.list != nil {
		e.list.usedRefs++
		c.reshare(e.list)
	}
	// Past their share, the least recently used go back among the keys
	// no call used, first in line there.
	for c.usedBytes > c.max/4*usedShare && c.used.back != c.used.front {
		old := c.used.back
		c.used.remove(old)
		c.unuse(old)
		c.listed.pushFront(old)
	}
}

// unuse counts e as no longer used (its queue is the caller's to change).
func (c *Catalog) unuse(e *entry) {
	if !e.used {
		return
	}
	e.used = false
	c.usedBytes -= entryBytes(e.scope)
	if e.list != nil {
		e.list.usedRefs--
		c.reshare(e.list)
	}
}

func (c *Catalog) queueOf(e *entry) *queue {
	if e.used {
		return &c.used
	}
	return &c.listed
}

// entryBytes is what a key of this scope costs: its entry, its slot in its
// endpoint's map, and its scope.
func entryBytes(scope string) int64 {
	return allocated(int(unsafe.Sizeof(entry{}))) + slotBytes(scope, (*entry)(nil)) + allocated(len(scope))
}

// endpointBytes is what an endpoint's map of keys costs, empty.
func endpointBytes(name string) int64 {
	return allocated(int(unsafe.Sizeof(endpoint{}))) + slotBytes(name, (*endpoint)(nil)) + allocated(len(name)) + mapBytes(0, 0)
}

// slotBytes is what one more entry of a map from K to V takes, at the
// emptiest a map is kept (7/16 full).
func slotBytes[K, V any](k K, v V) int64 {
	return int64(unsafe.Sizeof(k)+unsafe.Sizeof(v)+1) * 16 / 7
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

// find is the entry of key, or failing it of its endpoint's public scope.
func (c *Catalog) find(key ListKey) *entry {
	ep := c.endpoints[key.Endpoint]
	if ep == nil {
		return nil
	}
	if e := ep.scopes[key.Scope]; e != nil {
		return e
	}
	return ep.scopes[""]
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

// queue is a list of entries, most recent at its front.
type queue struct {
	front, back *entry
}

func (q *queue) pushFront(e *entry) {
	e.prev, e.next = nil, q.front
	if q.front != nil {
		q.front.prev = e
	} else {
		q.back = e
	}
	q.front = e
}

func (q *queue) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		q.front = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		q.back = e.prev
	}
	e.prev, e.next = nil, nil
}

func (q *queue) toFront(e *entry) {
	if q.front != e {
		q.remove(e)
		q.pushFront(e)
	}
}
