package jsonrpc

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// The one rule every reader of the gateway keeps: a member it reads is
// given once, and only as written. The official SDKs read a member given
// twice or in another letter case differently (Go's encoding/json folds
// the case of a struct's fields and keeps the last; JSON.parse and Go's
// maps keep each spelling apart, the last of each; encoding/json/v2
// refuses a name given twice), so JSON that breaks the rule is not read:
// a request is refused, an answer is answered for, a tool's schema or
// list is not learned. Keys are compared decoded, as encoding/json decodes
// them ("\u0069d" is id; a byte of invalid UTF-8 and a lone surrogate are
// U+FFFD), and folded as it folds them (Unicode's simple folding: "ſ" is
// "s", "K", the Kelvin sign, is "k").

// Fields reads the members of one object that a reader takes by name.
type Fields struct {
	// Names are the members read (at most 64).
	Names []string
	seen  uint64
}

// Which is the index in Names of the member key names, -1 when it names
// none; ErrUncertain when it names one already given, or one in another
// letter case.
func (f *Fields) Which(key []byte) (int, error) {
	for i, name := range f.Names {
		if !bytes.EqualFold(key, []byte(name)) {
			continue
		}
		if string(key) != name || f.seen&(1<<i) != 0 {
			return -1, ErrUncertain
		}
		f.seen |= 1 << i
		return i, nil
	}
	return -1, nil
}

// Keys holds the keys of the objects open as a value is read, for a
// reader that reads every member of them (a schema, a call's arguments):
// Add tells a key its object gave before, as written or in another letter
// case. Objects open and close as they nest (Open, Close); one Keys serves
// a whole value, its memory reused from object to object.
type Keys struct {
	// folded holds the keys of the open objects, folded, each after a
	// separator: 0xff, which no folded key holds (it is valid UTF-8).
	folded []byte
	// set holds the keys of the objects of more than keysInline keys, by
	// the object's id.
	set map[string]uint32
	ids uint32
}

// Object is an open object's place in Keys.
type Object struct {
	start, n int
	id       uint32 // 0 until its keys are in the set
}

// keysInline bounds the keys of an object compared one by one.
const keysInline = 16

const separator = 0xff

// Use gives k buf's room for the keys, before its first Open (a buffer
// the caller recycles); Room gives it back, as grown.
func (k *Keys) Use(buf []byte) { k.folded = buf[:0] }

// Room is the room k's keys took, to be used again.
func (k *Keys) Room() []byte { return k.folded[:0] }

// Open begins an object, inside the one open, if any.
func (k *Keys) Open() Object {
	if k.folded == nil {
		k.folded = make([]byte, 0, 256)
	}
	o := Object{start: len(k.folded)}
	k.folded = append(k.folded, separator)
	return o
}

// Close ends o, the innermost object open.
func (k *Keys) Close(o Object) { k.folded = k.folded[:o.start] }

// Add notes a key of o, the innermost object open (decoded, see
// AppendUnquoted), and reports whether it is new: false when o gave it
// before, in any letter case.
func (k *Keys) Add(o *Object, key []byte) bool {
	at := len(k.folded)
	k.folded = append(AppendFolded(k.folded, key), separator)
	if o.id != 0 {
		folded := k.folded[at : len(k.folded)-1]
		id, given := k.set[string(folded)]
		k.folded = k.folded[:at]
		if !given || id != o.id {
			k.set[string(folded)] = o.id
		}
		return !given || id != o.id
	}
	// The separator before the key, the key, the one after it: the same
	// key whole among those before.
	if bytes.Contains(k.folded[o.start:at], k.folded[at-1:]) {
		k.folded = k.folded[:at]
		return false
	}
	if o.n++; o.n > keysInline {
		k.toSet(o)
	}
	return true
}

// toSet moves o's keys to the set.
func (k *Keys) toSet(o *Object) {
	if k.set == nil {
		k.set = make(map[string]uint32, 4*keysInline)
	}
	k.ids++
	o.id = k.ids
	keys := k.folded[o.start+1:]
	for len(keys) > 0 {
		end := bytes.IndexByte(keys, separator)
		k.set[string(keys[:end])] = o.id
		keys = keys[end+1:]
	}
	k.folded = k.folded[:o.start+1]
}

// AppendFolded appends key folded as encoding/json folds a name: two keys
// fold alike when bytes.EqualFold says they are equal.
func AppendFolded(dst, key []byte) []byte {
	for i := 0; i < len(key); {
		if c := key[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(key[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += n
	}
	return dst
}

// foldRune is the smallest rune of r's fold set.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
