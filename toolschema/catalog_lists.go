package toolschema

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
	"unsafe"
)

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
