package toolschema

import (
	"crypto/sha256"
	"slices"
	"time"
	"unsafe"
)

// listResult is what a tools/list result holds that the catalog reads
// (readList).
type listResult struct {
	Tools      []listedTool
	NextCursor *string
	TTLMs      *int64
	CacheScope string
}

type listedTool struct {
	Name string
	// InputSchema is as written, in the result's bytes.
	InputSchema []byte
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
// time it was answered. A result that is not a tools/list result, or that
// cannot be read one way (a member read given twice or in another letter
// case: jsonrpc.ErrUncertain), is not learned: an error.
func (c *Catalog) Learn(key ListKey, result []byte, first bool, now time.Time) (Page, error) {
	var whole [32]byte
	if first {
		whole = sha256.Sum256(result)
		if page, ok := c.relearn(key, whole, now); ok {
			return page, nil
		}
	}
	res, err := readList(result)
	if err != nil {
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
	tools := c.named(res.Tools, sums, fresh)
	e := c.enter(key)
	last := res.NextCursor == nil || *res.NextCursor == ""
	if c.addPage(e, tools, first, last) {
		truncated = true
	}
	if first && last && !truncated {
		c.remember(whole, e.list, &res)
	}
	if truncated {
		e.complete = false // a tool beyond the bound is not absent
	}
	e.expires = expiresAt(now, res.ttlMs())
	page.Complete = e.complete && c.pending[e] == nil
	page.Dropped = c.settle(e)
	page.Complete = page.Complete && !page.Dropped
	return page, nil
}

// named are the listed tools that have a name, with their compiled
// schemas: those the catalog holds, else those just compiled (fresh).
func (c *Catalog) named(listed []listedTool, sums [][32]byte, fresh map[[32]byte]*compiled) []tool {
	tools := make([]tool, 0, len(listed))
	for i, t := range listed {
		if t.Name == "" {
			continue
		}
		cs := c.schemas[sums[i]]
		if cs == nil {
			cs = fresh[sums[i]]
		}
		tools = append(tools, tool{t.Name, cs})
	}
	return tools
}

// addPage adds one page's tools to e: to its listing under way, or as its
// list when the page is a whole listing, ends one, or belongs to one whose
// start was not seen. It reports whether the listing under way went past
// MaxTools.
func (c *Catalog) addPage(e *entry, tools []tool, first, last bool) (truncated bool) {
	switch p := c.pending[e]; {
	case first && last:
		c.dropPending(e)
		c.setList(e, c.intern(tools))
		e.complete = true
	case first:
		c.dropPending(e)
		c.addPending(e, tools)
	case p != nil:
		truncated = len(p.tools)+len(tools) > MaxTools
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
	return truncated
}

// ttlMs is the result's ttlMs, -1 when it has none.
func (r *listResult) ttlMs() int64 {
	if r.TTLMs != nil && *r.TTLMs >= 0 {
		return *r.TTLMs
	}
	return -1
}

// expiresAt is when a list answered at now with ttlMs goes stale, in Unix
// nanoseconds; 0 for a ttlMs of -1 (none).
func expiresAt(now time.Time, ttlMs int64) int64 {
	if ttlMs < 0 {
		return 0
	}
	return now.Add(time.Duration(ttlMs) * time.Millisecond).UnixNano()
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
	e.complete = true
	e.expires = expiresAt(now, a.ttlMs)
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
	a := &answer{list: l, tools: len(res.Tools), ttlMs: res.ttlMs(), public: res.CacheScope == "public"}
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
