package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// decode reads one JSON value into what the validator takes: maps, slices,
// strings, json.Number, bools and nil, as jsonschema.UnmarshalJSON does,
// in one pass over the bytes (encoding/json's Decoder scans them twice),
// with strings that hold no escape copied once. A member given twice keeps
// its last value, and invalid UTF-8 becomes U+FFFD, as encoding/json and
// the JSON package of the Go SDK's servers (segmentio/encoding) read them.
// A leading byte-order mark is skipped, as the TypeScript and Python SDKs
// skip it. A number is refused when a float64 cannot hold it, or when it is
// written in more than maxNumber bytes, or with an exponent over
// maxExponent (ErrNumberRange): checking a number against a bound makes it
// a big.Rat, at a cost that grows with its exponent and digits (1e-999999
// is 3 million bits), and MCP servers read numbers as float64 anyway.
func decode(b []byte) (any, error) { return decodeDepth(b, maxDepth) }

// Decode is decode for callers outside the package: a JSON-RPC body's
// params, read as the servers read them.
func Decode(b []byte) (any, error) { return decode(b) }

// ErrNumberRange is a number no float64 holds, or one written too long.
var ErrNumberRange = errors.New("a number out of range")

// maxNumber bounds a number's text, in bytes.
const maxNumber = 64

// maxExponent bounds the exponent a number is written with: a float64
// holds nothing from 1e309 up, nor down to 1e-324 but zero.
const maxExponent = 999

func decodeDepth(b []byte, depth int) (any, error) {
	return decodeWith(decoder{b: b, maxDepth: depth})
}

// decodeOn is decode, each value and string read taking steps from b.
func decodeOn(b *budget, body []byte) (any, error) {
	return decodeWith(decoder{b: body, maxDepth: maxDepth, budget: b})
}

// decodeArguments reads a tools/call body as decode does, checking all of
// it, but keeps only params.arguments, with its string values read as ""
// (for a Schema.blind): nil when the body is not an object, its params not
// an object, or its arguments absent or null.
func decodeArguments(b *budget, body []byte) (any, error) {
	d := decoder{b: bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), maxDepth: maxDepth, blind: true, budget: b}
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

// skim reads a value as value does, keeping only the member path names
// (the last of them when given twice), nil when it is not there.
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
	for {
		d.space()
		if d.i == len(d.b) || d.b[d.i] != '"' {
			return nil, d.fail("expected a member name")
		}
		raw, plain, err := d.scanString()
		if err != nil {
			return nil, err
		}
		match := string(raw) == path[0]
		if !plain {
			match = string(jsonrpc.AppendUnquoted(nil, raw)) == path[0]
		}
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
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		d.space()
		if d.i < len(d.b) && d.b[d.i] == end {
			d.i++
			return nil
		}
		for {
			if c == '{' {
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

func decodeWith(d decoder) (any, error) {
	d.b = bytes.TrimPrefix(d.b, []byte("\xef\xbb\xbf"))
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.b) {
		return nil, d.fail("data after the value")
	}
	return v, nil
}

// maxDepth bounds nesting, as the JSON-RPC scanner does.
const maxDepth = 1000

type decoder struct {
	b        []byte
	i        int
	maxDepth int
	// blind: string values (not member names) are checked and read as "",
	// for a schema that never looks at their content (Schema.blind).
	blind bool
	// budget, when there is one, pays two steps for each value and one
	// for each 64 bytes of a string.
	budget *budget
}

// step takes a value's steps from the budget.
func (d *decoder) step() { d.budget.spend(valueSteps) }

var errSyntax = errors.New("invalid JSON")

func (d *decoder) fail(what string) error {
	return errors.Join(errSyntax, errors.New(what+" at offset "+strconv.Itoa(d.i)))
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	d.step()
	if depth > d.maxDepth {
		return nil, d.fail("nesting too deep")
	}
	d.space()
	if d.i == len(d.b) {
		return nil, d.fail("unexpected end")
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		if d.blind {
			// Checked, not kept: the schema reads no string's content.
			_, _, err := d.scanString()
			return "", err
		}
		return d.string()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, d.fail("unexpected character")
}

func (d *decoder) literal(word string) error {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return d.fail("invalid literal")
	}
	d.i += len(word)
	return nil
}

func (d *decoder) object(depth int) (any, error) {
	d.i++ // {
	m := make(map[string]any)
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		d.space()
		if d.i == len(d.b) || d.b[d.i] != '"' {
			return nil, d.fail("expected a member name")
		}
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i == len(d.b) || d.b[d.i] != ':' {
			return nil, d.fail("expected ':'")
		}
		d.i++
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
		d.space()
		if d.i == len(d.b) {
			return nil, d.fail("unexpected end")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, nil
		default:
			return nil, d.fail("expected ',' or '}'")
		}
	}
}

func (d *decoder) array(depth int) (any, error) {
	d.i++ // [
	a := make([]any, 0, 4)
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return a, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if len(a) == cap(a) {
			a = slices.Grow(a, len(a)) // doubled: append grows large slices by a quarter, copying each item about five times
		}
		a = append(a, v)
		d.space()
		if d.i == len(d.b) {
			return nil, d.fail("unexpected end")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return a, nil
		default:
			return nil, d.fail("expected ',' or ']'")
		}
	}
}

// string reads a string, checking its escapes; its content is decoded as
// the JSON-RPC scanner decodes strings (jsonrpc.AppendUnquoted), as
// encoding/json does: invalid UTF-8 and lone surrogates become U+FFFD.
func (d *decoder) string() (string, error) {
	raw, plain, err := d.scanString()
	if err != nil {
		return "", err
	}
	if plain && utf8.Valid(raw) {
		return string(raw), nil
	}
	// Unquoted into a buffer nothing else holds: it becomes the string
	// without a second copy.
	buf := jsonrpc.AppendUnquoted(make([]byte, 0, len(raw)), raw)
	return unsafe.String(unsafe.SliceData(buf), len(buf)), nil
}

// scanString reads a string, checking its escapes, and returns its bytes
// between the quotes; plain says it holds no escape.
func (d *decoder) scanString() (raw []byte, plain bool, err error) {
	d.i++ // "
	start := d.i
	plain = true
	for {
		d.i = jsonrpc.SkipPlain(d.b, d.i)
		if d.i >= len(d.b) {
			return nil, false, d.fail("unterminated string")
		}
		switch c := d.b[d.i]; {
		case c == '"':
			raw = d.b[start:d.i]
			d.i++
			d.budget.spendBytes(len(raw), 64)
			return raw, plain, nil
		case c == '\\':
			plain = false
			if !d.escape() {
				return nil, false, d.fail("invalid escape")
			}
			d.i++
		default:
			return nil, false, d.fail("control character in a string")
		}
	}
}

// escape checks the escape at d.i and leaves d.i on its last byte.
func (d *decoder) escape() bool {
	if d.i+1 >= len(d.b) {
		return false
	}
	switch d.b[d.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.i++
		return true
	case 'u':
		if d.i+6 > len(d.b) {
			return false
		}
		for _, c := range d.b[d.i+2 : d.i+6] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		d.i += 5
		return true
	}
	return false
}

// number reads a number in JSON's grammar.
func (d *decoder) number() (any, error) {
	text, err := d.numberText()
	if err != nil {
		return nil, err
	}
	if len(text) == 1 {
		return digits[text[0]-'0'], nil
	}
	// Its text and its place in an interface are two allocations, and more
	// bytes to read again: a number of many digits is more than a value.
	d.budget.spendBytes(len(text), 8)
	return json.Number(text), nil
}

// digits are the numbers of one digit, made once: arrays of small numbers
// are common, and each number made would cost an allocation.
var digits = func() (numbers [10]any) {
	for i := range numbers {
		numbers[i] = json.Number(strconv.Itoa(i))
	}
	return numbers
}()

// numberText reads a number in JSON's grammar, and returns its text.
func (d *decoder) numberText() ([]byte, error) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, d.fail("invalid number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	exponent := 0
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		from := d.i
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
		for _, c := range d.b[from:d.i] {
			exponent = min(10*exponent+int(c-'0'), maxExponent+1)
		}
	}
	text := d.b[start:d.i]
	if len(text) > maxNumber || exponent > maxExponent {
		return nil, ErrNumberRange
	}
	if exponent+maxNumber < 300 {
		// Written in maxNumber characters, with an exponent that small, a
		// number is 0 or between 1e-300 and 1e300: a float64 holds it.
		return text, nil
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil || (f == 0 && !isZero(text)) {
		return nil, ErrNumberRange // too large, or too small but not 0
	}
	return text, nil
}

// isZero reports whether a number's text writes 0: no digit but 0 before
// its exponent.
func isZero(text []byte) bool {
	for _, c := range text {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}
