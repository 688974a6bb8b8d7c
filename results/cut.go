package results

import (
	"bytes"
	"errors"
	"strings"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Cutting a result to its budget (truncate): the content blocks that fit
// whole are kept, in order; the first that does not is cut if it is text
// (at a character, never inside one or an escape) and dropped if it is
// not (an image, audio, a resource: never cut in the middle), and every
// block after it is dropped. A RESULT_TRUNCATED warning comes first, and
// isError stays what the server said. A result with structuredContent is
// refused whole: its schema holds all of it or nothing. The answer written
// is never longer than the budget.
//
// The cut reads the response once, as it comes: it keeps its first budget
// bytes and, of the rest, what the scanner keeps (scan.go), so that a
// result of any size costs the budget and a constant.

// cut reads one response for the call of its hook (feature.Cut).
type cut struct {
	h    *held
	sc   scanner
	head []byte // the response's first bytes, up to its room (the budget)
	n    int    // the bytes read, at most maxRead
	done bool   // the response's value ended

	// id is the response's, as written (quotes and all), up to maxID;
	// idOn: it is being read.
	id         []byte
	idOn, long bool
	// What the result holds: content, isError's first byte, a
	// structuredContent; seen marks the members of the message and the
	// result read, each allowed once.
	result, content, structured bool
	isError                     byte
	seen                        uint16

	// The blocks: how many began; where the first began and where the
	// last kept whole ends (offsets in the response), and how many were;
	// limit is what they may take. stopped: a block did not fit, and
	// none after it is kept; its type and text are the candidate's.
	blocks, from, kept, keptBlocks, limit, maxRead int
	stopped                                        bool
	block, candidate                               block
	typeOn                                         bool

	// sink, when set, is given the text of the text blocks, as written
	// (page mode: pagecut.go); textOn: a text it takes is being read.
	sink   textSink
	textOn bool
}

// textSink takes the text of a result's text blocks as the cut reads it.
type textSink interface {
	// textBegin: the text of block b begins; it reports whether the sink
	// takes it.
	textBegin(b *block) bool
	// text is the next bytes of the text, as written (escapes and all).
	text(raw []byte)
	// textEnd: the text ended.
	textEnd()
	// blockDone: the block ended.
	blockDone(b *block)
}

// block is what is known of a content block: its type (as written, up to
// maxKey bytes) and where its text runs (-1: not seen, or not ended).
// odd: a key of it was escaped, or its type or text given twice: it is
// not taken for text.
type block struct {
	typ              []byte
	textFrom, textTo int
	odd              bool
	seen             uint8
}

// maxID bounds the id a response is matched by.
const maxID = 128

// The members the scanner tells apart, each allowed once.
const (
	seenID uint16 = 1 << iota
	seenResult
	seenError
	seenContent
	seenIsError
	seenStructured
)

var members = [2]map[string]uint16{
	{"id": seenID, "result": seenResult, "error": seenError},
	{"content": seenContent, "isError": seenIsError, "structuredContent": seenStructured},
}

// memberNames are members' keys, and blockNames those of a block's the
// cut reads, to tell one given in another letter case.
var (
	memberNames = [2][]string{{"id", "result", "error"}, {"content", "isError", "structuredContent"}}
	blockNames  = []string{"type", "text"}
)

// anotherCase reports whether key is one of names in another letter case
// (folded as encoding/json folds it: "reſult" is result), which readers
// that fold case take for it and the others do not.
func anotherCase(key string, names []string) bool {
	for _, name := range names {
		if key != name && strings.EqualFold(key, name) {
			return true
		}
	}
	return false
}

func newCut(h *held) *cut {
	c := newHeadless(h)
	c.head = make([]byte, 0, h.budget)
	return c
}

// newHeadless is a cut that keeps none of the response's bytes (its head
// has no room): one that only reads it, for a sink (page mode).
func newHeadless(h *held) *cut {
	c := &cut{h: h}
	c.limit, c.maxRead = h.budget-h.overhead(), maxRead
	return c
}

// maxRead bounds what a cut reads of a response: past it, the gateway
// stops reading and refuses it. A server's isError comes after its
// content, so a result is read to its end to be cut; one that never ends
// must not be read for ever.
const maxRead = 1 << 30

// Write reads the next piece of the response; it reports whether it reads
// more (not past maxRead).
func (c *cut) Write(p []byte) bool {
	if c.n+len(p) > c.maxRead {
		c.sc.err, c.n = errTooLong, c.maxRead
		return false
	}
	if k := cap(c.head) - len(c.head); k > 0 {
		c.head = append(c.head, p[:min(k, len(p))]...)
	}
	for i := 0; i < len(p) && c.sc.err == nil; i++ {
		if c.sc.state == scanInString && !c.sc.escape && !c.idOn && !c.typeOn {
			// Plain bytes of a string, the bulk of a result, eight at a
			// time, as the JSON-RPC reader skips them.
			j := jsonrpc.SkipPlain(p, i)
			if c.textOn && j > i {
				c.sink.text(p[i:j])
			}
			if i = j; i == len(p) {
				break
			}
		}
		if c.textOn && (p[i] != '"' || c.sc.escape) {
			c.sink.text(p[i : i+1])
		}
		c.step(p[i], c.n+i)
	}
	c.n += len(p)
	return c.sc.err == nil
}

// errTooLong: the response is longer than a cut reads.
var errTooLong = errors.New("longer than a cut reads")

// step reads the byte b at offset pos.
func (c *cut) step(b byte, pos int) {
	s := &c.sc
	switch s.state {
	case scanInString:
		c.keep(b)
		if s.stringByte(b) {
			c.stringEnd(pos)
		}
		return
	case scanInKey:
		if s.keyByte(b) {
			c.keyRead()
		}
		return
	case scanInScalar:
		if scalarByte(b) {
			c.keep(b)
			return
		}
		c.idOn = false
		s.state = scanAfter
	}
	depth := len(s.stack)
	if !s.structural(b) {
		if len(s.stack) < depth {
			c.closed(pos)
		}
		return
	}
	c.valueStart(b, pos)
	switch {
	case b == '{' || b == '[':
		s.push(b)
	case b == '"':
		s.state = scanInString
	case scalarByte(b):
		s.state = scanInScalar
	default:
		s.err = errShape
	}
}

// keyRead checks the key just read: the members of the message and the
// result the cut reads are allowed once, only as written, and never
// escaped (it might be one of them), as every reader of the gateway reads
// them (internal/jsonrpc, oneway.go).
func (c *cut) keyRead() {
	level := -1
	switch {
	case len(c.sc.stack) == 1:
		level = 0
	case c.sc.inResult():
		level = 1
	case c.sc.inBlock():
		c.blockKey(c.sc.memberKey())
	}
	if level < 0 {
		return
	}
	key := c.sc.memberKey()
	if key == escapedKey || anotherCase(key, memberNames[level]) {
		c.sc.err = errShape
	}
	if bit := members[level][key]; bit != 0 {
		if c.seen&bit != 0 {
			c.sc.err = errShape
		}
		c.seen |= bit
	}
}

// blockKey notes a key of the block being read.
func (c *cut) blockKey(key string) {
	var bit uint8
	switch key {
	case "type":
		bit = 1
	case "text":
		bit = 2
	}
	switch {
	case key == escapedKey || c.block.seen&bit != 0 || anotherCase(key, blockNames):
		c.block.odd = true
	default:
		c.block.seen |= bit
	}
}

// valueStart notes the value beginning with b at pos.
func (c *cut) valueStart(b byte, pos int) {
	s := &c.sc
	switch key := s.memberKey(); {
	case len(s.stack) == 1:
		switch key {
		case "result":
			c.result = b == '{'
		case "id":
			c.idOn, c.id = true, c.id[:0]
			c.keep(b)
		case "error":
			s.err = errShape
		}
	case s.inResult():
		switch key {
		case "content":
			c.content = b == '['
		case "isError":
			c.isError = b
		case "structuredContent":
			c.structured = true
		}
	case s.inContent():
		c.blockBegin(b, pos)
	case s.inBlock() && b == '"':
		switch key {
		case "type":
			c.typeOn, c.block.typ = true, c.block.typ[:0]
		case "text":
			c.block.textFrom = pos + 1
			c.textOn = c.sink != nil && c.sink.textBegin(&c.block)
		}
	}
}

// keep keeps a byte of the id, or of a block's type, being read.
func (c *cut) keep(b byte) {
	switch {
	case c.sc.state == scanInString && c.typeOn && b != '"':
		if len(c.block.typ) < maxKey {
			c.block.typ = append(c.block.typ, b)
		}
	case !c.idOn:
	case len(c.id) < maxID:
		c.id = append(c.id, b)
	default:
		c.long = true
	}
}

// stringEnd ends the string value whose closing quote is at pos.
func (c *cut) stringEnd(pos int) {
	c.idOn, c.typeOn = false, false
	if c.textOn {
		c.textOn = false
		c.sink.textEnd()
	}
	if c.sc.inBlock() && c.sc.memberKey() == "text" {
		c.block.textTo = pos
	}
}

func (c *cut) blockBegin(b byte, pos int) {
	if b != '{' {
		c.sc.err = errShape
		return
	}
	if c.blocks == 0 {
		c.from, c.kept = pos, pos
	}
	c.blocks++
	c.block = block{typ: c.block.typ[:0], textFrom: -1, textTo: -1}
}

// closed follows the object or array that closed at pos: a block, or the
// message.
func (c *cut) closed(pos int) {
	switch {
	case len(c.sc.stack) == 0:
		c.done = true
	case c.sc.inContent():
		if c.sink != nil {
			c.sink.blockDone(&c.block)
		}
		c.blockEnd(pos + 1)
	}
}

// blockEnd ends the block that ends before end: kept whole if it fits,
// otherwise the candidate to cut, the last one read.
func (c *cut) blockEnd(end int) {
	if c.stopped {
		return
	}
	if end <= len(c.head) && end-c.from <= c.limit {
		c.kept = end
		c.keptBlocks++
		return
	}
	c.stopped = true
	c.candidate = c.block
	c.candidate.typ = bytes.Clone(c.block.typ)
}
