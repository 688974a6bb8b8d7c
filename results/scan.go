package results

import (
	"errors"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Reading a call's response once, in pieces, for what cutting it takes:
// where its content blocks lie, which are text and where their text runs,
// its id, isError, and whether it carries structuredContent. The scanner
// keeps no more than a key, the id and one frame per level of nesting: a
// response of any size costs it the same. It checks the structure it
// reads (brackets, strings, their escapes), not the scalars: what it lets
// through is checked whole once cut (cut.close).
//
// It reads by the gateway's one rule (internal/jsonrpc, oneway.go): a
// member the cut reads (id, result, error; content, isError,
// structuredContent; a block's type and text) given twice, in another
// letter case, or escaped, is not read. It is not built on the JSON-RPC
// reader's Walker or Skimmer, though: the Walker reads a value held whole
// (a cut reads up to 1 GiB, keeping its budget's bytes), and the Skimmer
// follows the message's top level only, where the cut follows the result,
// its content, and each block's members, noting where they lie as the
// pieces pass. Teaching the Skimmer those paths would move what a cut
// reads into the JSON-RPC reader for one caller; the two share the
// scanning of a string's plain bytes (jsonrpc.SkipPlain) and the rule.

// errShape: the response is not one a result can be cut from, or it breaks
// the structure the scanner reads.
var errShape = errors.New("not a result that can be cut")

// maxKey bounds the keys the scanner names: longer ones name nothing it
// looks for.
const maxKey = 24

// frame is one open object or array; key is the member of an object
// being read ("" for one the scanner does not name).
type frame struct {
	bracket byte
	key     string
}

type scanState uint8

const (
	scanValue    scanState = iota // before a value
	scanKeyOrEnd                  // after '{': a key or '}'
	scanKey                       // after ',' in an object: a key
	scanInKey                     // in a key
	scanColon                     // after a key
	scanAfter                     // after a value: ',', a closing bracket, or the end
	scanInString                  // in a string value
	scanInScalar                  // in a number or a literal
)

// scanner follows the structure of the message; the cut (cut.go) acts on
// what it finds.
type scanner struct {
	stack  []frame
	state  scanState
	escape bool
	// key is the key being read, unless it is long or escaped.
	key           []byte
	long, escaped bool
	err           error
}

// escapedKey names a key that was escaped: it might be any of the keys the
// cut looks for (no key read as written holds a backslash).
const escapedKey = "\\"

// The levels the cut reads: the message's members (1), the result's (2),
// the content's blocks (3) and a block's members (4).

// inResult reports whether the position is among the result's members.
func (s *scanner) inResult() bool {
	return len(s.stack) == 2 && s.stack[0].key == "result" && s.stack[1].bracket == '{'
}

// inContent reports whether the position is among the content's blocks.
func (s *scanner) inContent() bool {
	return len(s.stack) == 3 && s.inPath() && s.stack[2].bracket == '['
}

// inBlock reports whether the position is among a block's members.
func (s *scanner) inBlock() bool {
	return len(s.stack) == 4 && s.inPath() && s.stack[2].bracket == '[' && s.stack[3].bracket == '{'
}

// inPath: the frames up to the content are the result's and its content's.
func (s *scanner) inPath() bool {
	return s.stack[0].key == "result" && s.stack[1].bracket == '{' && s.stack[1].key == "content"
}

// memberKey is the key of the member being read in the innermost object.
func (s *scanner) memberKey() string {
	if n := len(s.stack); n > 0 {
		return s.stack[n-1].key
	}
	return ""
}

// push opens an object or array.
func (s *scanner) push(c byte) {
	if len(s.stack) >= jsonrpc.MaxDepth {
		s.err = errShape
		return
	}
	s.stack = append(s.stack, frame{bracket: c})
	s.state = scanValue
	if c == '{' {
		s.state = scanKeyOrEnd
	}
}

// pop closes the innermost object or array with c.
func (s *scanner) pop(c byte) {
	n := len(s.stack)
	if n == 0 || s.stack[n-1].bracket+2 != c { // '{'+2 is '}', '['+2 is ']'
		s.err = errShape
		return
	}
	s.stack = s.stack[:n-1]
	s.state = scanAfter
}

// keyByte reads a byte of a key; it reports whether the key ended.
func (s *scanner) keyByte(c byte) bool {
	switch {
	case s.escape:
		s.escape, s.escaped = false, true
	case c == '\\':
		s.escape = true
	case c == '"':
		key := string(s.key)
		switch {
		case s.escaped:
			key = escapedKey
		case s.long:
			key = "" // names nothing looked for
		}
		s.stack[len(s.stack)-1].key = key
		s.key, s.long, s.escaped = s.key[:0], false, false
		s.state = scanColon
		return true
	case c < 0x20:
		s.err = errShape
	case len(s.key) < maxKey:
		s.key = append(s.key, c)
	default:
		s.long = true
	}
	return false
}

// structural reads c between tokens; it reports whether c starts a value
// (the caller then reads it as one).
func (s *scanner) structural(c byte) bool {
	switch {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		return false
	case s.state == scanValue:
		if c == ']' && len(s.stack) > 0 && s.stack[len(s.stack)-1].bracket == '[' {
			s.pop(c) // an empty array
			return false
		}
		return true
	case s.state == scanKeyOrEnd && c == '}':
		s.pop(c)
	case (s.state == scanKeyOrEnd || s.state == scanKey) && c == '"':
		s.state = scanInKey
	case s.state == scanColon && c == ':':
		s.state = scanValue
	case s.state == scanAfter && c == ',' && len(s.stack) > 0:
		s.state = scanValue
		if s.stack[len(s.stack)-1].bracket == '{' {
			s.state = scanKey
		}
	case s.state == scanAfter && (c == '}' || c == ']'):
		s.pop(c)
	default:
		s.err = errShape
	}
	return false
}

// stringByte reads a byte of a string value; it reports whether the
// string ended.
func (s *scanner) stringByte(c byte) bool {
	switch {
	case s.escape:
		s.escape = false
	case c == '\\':
		s.escape = true
	case c == '"':
		s.state = scanAfter
		return true
	case c < 0x20:
		s.err = errShape
	}
	return false
}

// scalarByte reports whether c goes on a number or a literal.
func scalarByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}
