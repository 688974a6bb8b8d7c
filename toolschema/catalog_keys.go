package toolschema

import (
	"cmp"
	"unsafe"
)

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
