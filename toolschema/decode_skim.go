package toolschema

import (
	"bytes"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// decodeArguments reads a tools/call body as decode does, checking all of
// it, but keeps only params.arguments, with its string values read as ""
// when blind (for a Schema.blind): nil when the body is not an object, its
// params not an object, or its arguments absent or null. What it reads
// must read one way (ErrTwoWays): params and arguments, each given once
// and only as written, and every member of the arguments; the rest is
// checked as JSON only, as the JSON-RPC reader checks it.
func decodeArguments(b *budget, body []byte, blind bool) (any, error) {
	d := decoder{b: bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), maxDepth: maxDepth, blind: blind, budget: b}
	defer d.giveKeysRoom(d.takeKeysRoom())
	v, err := d.skim(0, argumentsPath)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.b) {
		return nil, d.fail("data after the value")
	}
	return v, nil
}

var argumentsPath = []string{"params", "arguments"}

// skim reads a value as value does, keeping only the member path names,
// nil when it is not there. The member given twice, or again in another
// letter case, is ErrTwoWays.
func (d *decoder) skim(depth int, path []string) (any, error) {
	if len(path) == 0 {
		return d.value(depth)
	}
	d.step()
	if depth > d.maxDepth {
		return nil, d.fail("nesting too deep")
	}
	d.space()
	if d.i == len(d.b) || d.b[d.i] != '{' {
		return nil, d.skip(depth)
	}
	d.i++ // {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return nil, nil
	}
	var kept any
	fields := jsonrpc.Fields{Names: path[:1]}
	for {
		d.space()
		if d.i == len(d.b) || d.b[d.i] != '"' {
			return nil, d.fail("expected a member name")
		}
		key, err := d.memberName()
		if err != nil {
			return nil, err
		}
		i, err := fields.Which(key)
		if err != nil {
			return nil, twoWays{string(key)}
		}
		match := i == 0
		d.space()
		if d.i == len(d.b) || d.b[d.i] != ':' {
			return nil, d.fail("expected ':'")
		}
		d.i++
		if match {
			kept, err = d.skim(depth+1, path[1:])
		} else {
			err = d.skip(depth + 1)
		}
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i == len(d.b) {
			return nil, d.fail("unexpected end")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return kept, nil
		default:
			return nil, d.fail("expected ',' or '}'")
		}
	}
}

// skip reads a value as value does, accepting exactly what it accepts,
// and keeps nothing.
func (d *decoder) skip(depth int) error {
	d.step()
	if depth > d.maxDepth {
		return d.fail("nesting too deep")
	}
	d.space()
	if d.i == len(d.b) {
		return d.fail("unexpected end")
	}
	switch c := d.b[d.i]; {
	case c == '{' || c == '[':
		return d.skipContainer(c, depth)
	case c == '"':
		_, _, err := d.scanString()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.numberText()
		return err
	}
	return d.fail("unexpected character")
}

// skipContainer skips an object or an array, open being its first byte,
// as skip does.
func (d *decoder) skipContainer(open byte, depth int) error {
	end := byte('}')
	if open == '[' {
		end = ']'
	}
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == end {
		d.i++
		return nil
	}
	for {
		if open == '{' {
			d.space()
			if d.i == len(d.b) || d.b[d.i] != '"' {
				return d.fail("expected a member name")
			}
			if _, _, err := d.scanString(); err != nil {
				return err
			}
			d.space()
			if d.i == len(d.b) || d.b[d.i] != ':' {
				return d.fail("expected ':'")
			}
			d.i++
		}
		if err := d.skip(depth + 1); err != nil {
			return err
		}
		d.space()
		if d.i == len(d.b) {
			return d.fail("unexpected end")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case end:
			d.i++
			return nil
		default:
			return d.fail("expected ',' or '" + string(end) + "'")
		}
	}
}
