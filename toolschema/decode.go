package toolschema

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// decode reads one JSON value into what the validator takes: maps, slices,
// strings, json.Number, bools and nil, as jsonschema.UnmarshalJSON does,
// in one pass over the bytes (encoding/json's Decoder scans them twice),
// with strings that hold no escape copied once. It reads JSON one way, as
// every reader of the gateway does (internal/jsonrpc, oneway.go): a member
// given twice, or again in another letter case, is refused (ErrTwoWays),
// since the official SDKs read it differently; keys are compared decoded,
// and invalid UTF-8 becomes U+FFFD, as encoding/json and the JSON package
// of the Go SDK's servers (segmentio/encoding) read it. A leading
// byte-order mark is skipped, as the TypeScript and Python SDKs skip it. A
// number is refused when a float64 cannot hold it, or when it is written
// in more than maxNumber bytes, or with an exponent over maxExponent
// (ErrNumberRange): checking a number against a bound makes it a big.Rat,
// at a cost that grows with its exponent and digits (1e-999999 is 3
// million bits), and MCP servers read numbers as float64 anyway.
func decode(b []byte) (any, error) { return decodeDepth(b, maxDepth) }

// Decode is decode for callers outside the package: a JSON-RPC body's
// params, read as the servers read them.
func Decode(b []byte) (any, error) { return decode(b) }

// ErrNumberRange is a number no float64 holds, or one written too long.
var ErrNumberRange = errors.New("a number out of range")

// ErrTwoWays is JSON the official SDKs read in two ways: an object that
// gives a member twice, or again in another letter case.
var ErrTwoWays = errors.New("a member given twice, or again in another letter case")

// twoWays is ErrTwoWays for one key.
type twoWays struct{ key string }

func (e twoWays) Error() string { return strconv.Quote(clipKey(e.key)) + ": " + ErrTwoWays.Error() }

func (e twoWays) Is(target error) bool { return target == ErrTwoWays }

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

func decodeWith(d decoder) (any, error) {
	defer d.giveKeysRoom(d.takeKeysRoom())
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
const maxDepth = jsonrpc.MaxDepth

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
	// keys are the keys of the objects open, to refuse one given twice;
	// unquoted holds a key decoded.
	keys     jsonrpc.Keys
	unquoted []byte
}

// memberName reads an object's key (d.i at its quote), decoded: a slice
// of the input, or of a buffer d reuses.
func (d *decoder) memberName() ([]byte, error) {
	raw, plain, err := d.scanString()
	if err != nil || (plain && utf8.Valid(raw)) {
		return raw, err
	}
	d.unquoted = jsonrpc.AppendUnquoted(d.unquoted[:0], raw)
	return d.unquoted, nil
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
	keys := d.keys.Open()
	for {
		d.space()
		if d.i == len(d.b) || d.b[d.i] != '"' {
			return nil, d.fail("expected a member name")
		}
		key, err := d.memberName()
		if err != nil {
			return nil, err
		}
		if !d.keys.Add(&keys, key) {
			return nil, twoWays{string(key)}
		}
		k := string(key)
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
			d.keys.Close(keys)
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

// keysRoom recycles the room decoders keep their objects' keys in.
var keysRoom = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// maxKeysRoom bounds the room kept for the next decoder.
const maxKeysRoom = 64 << 10

// takeKeysRoom gives d recycled room for its keys; giveKeysRoom gives it
// back, as grown.
func (d *decoder) takeKeysRoom() *[]byte {
	room := keysRoom.Get().(*[]byte)
	d.keys.Use(*room)
	return room
}

func (d *decoder) giveKeysRoom(room *[]byte) {
	if r := d.keys.Room(); cap(r) <= maxKeysRoom {
		*room = r
		keysRoom.Put(room)
	}
}
