package jsonrpc

import (
	"errors"
	"unicode/utf8"
)

// Reading a JSON document in one pass, where its values are written, for a
// caller that edits it by splicing bytes (a tools/list answer filtered, a
// result given one more content block): what it does not touch stays as
// the upstream wrote it.

// Walker reads one JSON value in a single pass: the caller descends into
// the objects and arrays it cares about and skips the rest, each value being
// validated as it is read (see scanner).
type Walker struct {
	s     scanner
	depth int
	// key holds a key that had to be decoded.
	key []byte
}

// NewWalker returns a walker at the start of b.
func NewWalker(b []byte) *Walker {
	w := &Walker{s: scanner{b: b}}
	w.s.ws()
	return w
}

// Pos is where the next value starts (or the input ends).
func (w *Walker) Pos() int {
	w.s.ws()
	return w.s.i
}

// Offset is where the last value read ends.
func (w *Walker) Offset() int { return w.s.i }

// Peek is the first byte of the next value, 0 at the end.
func (w *Walker) Peek() byte {
	w.s.ws()
	return w.s.peek()
}

// Skip reads the next value without descending into it.
func (w *Walker) Skip() error {
	w.s.ws()
	return w.s.value(w.depth + 1)
}

// Object reads the object that comes next, calling member with each key
// (decoded as encoding/json decodes it; the slice is valid until the next
// key is read), positioned at the value, which member must read (Skip,
// Object, Array).
func (w *Walker) Object(member func(key []byte) error) error {
	s := &w.s
	s.ws()
	if w.depth >= MaxDepth {
		return s.errorf("nesting deeper than %d", MaxDepth)
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	w.depth++
	defer func() { w.depth-- }()
	s.ws()
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if s.peek() != '"' {
			return s.errorf("want an object key")
		}
		start := s.i
		escaped, err := s.scanStr()
		if err != nil {
			return err
		}
		key := s.b[start+1 : s.i-1]
		if escaped || !utf8.Valid(key) {
			w.key = unquote(w.key[:0], key)
			key = w.key
		}
		s.ws()
		if err := s.expect(':'); err != nil {
			return err
		}
		s.ws()
		if err := member(key); err != nil {
			return err
		}
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		return s.expect('}')
	}
}

// Array reads the array that comes next, calling element positioned at
// each element, which element must read.
func (w *Walker) Array(element func() error) error {
	s := &w.s
	s.ws()
	if w.depth >= MaxDepth {
		return s.errorf("nesting deeper than %d", MaxDepth)
	}
	if err := s.expect('['); err != nil {
		return err
	}
	w.depth++
	defer func() { w.depth-- }()
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if err := element(); err != nil {
			return err
		}
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		return s.expect(']')
	}
}

// End checks that only whitespace follows what was read.
func (w *Walker) End() error {
	w.s.ws()
	if w.s.i != len(w.s.b) {
		return w.s.errorf("unexpected data after the value")
	}
	return nil
}

// Member is one member of an object: its key, decoded as encoding/json
// decodes it, and where its value lies in the bytes given to Members.
type Member struct {
	Key        []byte
	Start, End int
}

// errStop ends a walk early, and is no error.
var errStop = errors.New("stop")

// Members reads the object b holds (whitespace around it allowed) and calls
// visit with each member, in order, until visit returns false. b is
// validated up to where the visit stops. The key is valid until visit
// returns.
func Members(b []byte, visit func(Member) bool) error {
	w := NewWalker(b)
	err := w.Object(func(key []byte) error {
		m := Member{Key: key, Start: w.Pos()}
		if err := w.Skip(); err != nil {
			return err
		}
		m.End = w.s.i
		if !visit(m) {
			return errStop
		}
		return nil
	})
	switch {
	case err == errStop:
		return nil
	case err != nil:
		return err
	}
	return w.End()
}
