package toolschema

import (
	"encoding/json"
	"math/big"
	"math/bits"
	"slices"
	"strconv"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The values of a check are what decode makes: maps, slices, strings,
// json.Number, bools and nil. Two are equal as the validator compares them
// (numbers as exact rationals: 1, 1.0 and 10e-1 are one number), here
// without making a big.Rat of each: a number is read as a decimal, and
// equal decimals are written alike.

// jsonType is one of JSON Schema's types, as a bit of a set of them.
type jsonType uint8

const (
	nullType jsonType = 1 << iota
	booleanType
	numberType
	integerType
	stringType
	arrayType
	objectType
)

var typeNames = [...]struct {
	t    jsonType
	name string
}{
	{nullType, "null"}, {booleanType, "boolean"}, {numberType, "number"}, {integerType, "integer"},
	{stringType, "string"}, {arrayType, "array"}, {objectType, "object"},
}

func (t jsonType) String() string {
	for _, n := range typeNames {
		if n.t == t {
			return n.name
		}
	}
	return ""
}

// typeOf is the type of a decoded value, 0 for what decode never makes.
func typeOf(v any) jsonType {
	switch v.(type) {
	case nil:
		return nullType
	case bool:
		return booleanType
	case json.Number:
		return numberType
	case string:
		return stringType
	case []any:
		return arrayType
	case map[string]any:
		return objectType
	}
	return 0
}

// validatorTypes are the types of the validator's Types, by bit.
var validatorTypes = func() (types [64]jsonType) {
	for _, n := range typeNames {
		var one jsonschema.Types
		one.Add(n.name)
		types[bits.TrailingZeros(uint(one))] = n.t
	}
	return types
}()

// typesOf is the set of types a schema's type keyword names.
func typesOf(types *jsonschema.Types) jsonType {
	var set jsonType
	for t := uint(*types); t != 0; t &= t - 1 {
		set |= validatorTypes[bits.TrailingZeros(t)]
	}
	return set
}

// decimal is a number as written, read exactly: ±0.digits × 10^exp, with
// digits free of leading and trailing zeros ("" for zero).
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// decimalOf reads a number's text, as decode checked it.
func decimalOf(text string) decimal {
	i := 0
	neg := text[0] == '-'
	if neg {
		i++
	}
	from := i
	for i < len(text) && text[i] >= '0' && text[i] <= '9' {
		i++
	}
	whole := text[from:i]
	fraction := ""
	if i < len(text) && text[i] == '.' {
		i++
		from = i
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			i++
		}
		fraction = text[from:i]
	}
	exp := 0
	if i < len(text) {
		e, _ := strconv.Atoi(text[i+1:]) // decode bounds it to maxExponent
		exp = e
	}
	digits := whole
	if fraction != "" {
		digits += fraction
	}
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	if lead == len(digits) {
		return decimal{}
	}
	trail := len(digits)
	for digits[trail-1] == '0' {
		trail--
	}
	return decimal{neg: neg, digits: digits[lead:trail], exp: len(whole) - lead + exp}
}

// isInteger reports whether a number has no fractional part.
func (d decimal) isInteger() bool { return d.exp >= len(d.digits) }

// rat is the number as the validator compares it with its bounds.
func (d decimal) rat() *big.Rat {
	r, _ := new(big.Rat).SetString(d.String())
	return r
}

// String writes d in JSON's grammar: [-]0.DIGITSeEXP, or 0.
func (d decimal) String() string {
	if d.digits == "" {
		return "0"
	}
	b := make([]byte, 0, len(d.digits)+8)
	if d.neg {
		b = append(b, '-')
	}
	b = append(b, "0."...)
	b = append(b, d.digits...)
	b = append(b, 'e')
	return string(strconv.AppendInt(b, int64(d.exp), 10))
}

// equal reports whether a and b are equal JSON values, each step of the
// comparison taken from bud.
func equal(bud *budget, a, b any) bool {
	bud.spend(1)
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !equal(bud, va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(bud, a[i], b[i]) {
				return false
			}
		}
		return true
	case string:
		b, ok := b.(string)
		bud.spendBytes(len(a), 64)
		return ok && a == b
	case json.Number:
		b, ok := b.(json.Number)
		return ok && decimalOf(string(a)) == decimalOf(string(b))
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	}
	return false
}

// appendKey writes a value's key: equal values, and only they, have equal
// keys. Strings are written with their length, numbers as decimals, an
// object's members sorted by name.
func appendKey(bud *budget, buf []byte, v any) []byte {
	bud.spend(1)
	switch v := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		bud.spend(len(names))
		slices.Sort(names)
		buf = append(buf, '{')
		for _, k := range names {
			buf = appendString(bud, buf, k)
			buf = appendKey(bud, buf, v[k])
		}
		return append(buf, '}')
	case []any:
		buf = append(buf, '[')
		for _, item := range v {
			buf = appendKey(bud, buf, item)
		}
		return append(buf, ']')
	case string:
		return appendString(bud, buf, v)
	case json.Number:
		d := decimalOf(string(v))
		buf = append(buf, '#')
		if d.neg {
			buf = append(buf, '-')
		}
		buf = append(buf, d.digits...)
		buf = append(buf, 'e')
		buf = strconv.AppendInt(buf, int64(d.exp), 10)
		return append(buf, ';')
	case bool:
		if v {
			return append(buf, 't')
		}
		return append(buf, 'f')
	}
	return append(buf, 'n')
}

func appendString(bud *budget, buf []byte, s string) []byte {
	bud.spendBytes(len(s), 64)
	buf = append(buf, '"')
	buf = strconv.AppendInt(buf, int64(len(s)), 10)
	buf = append(buf, ':')
	return append(buf, s...)
}

// valueSet is an enum's values, found by key rather than compared one by
// one.
type valueSet struct {
	types jsonType // the types of its values
	// strings are its strings as they are; keys the key of every other
	// value.
	strings map[string]struct{}
	keys    map[string]struct{}
}

func newValueSet(values []any) *valueSet {
	set := &valueSet{strings: map[string]struct{}{}, keys: map[string]struct{}{}}
	for _, v := range values {
		set.types |= typeOf(v)
		if s, ok := v.(string); ok {
			set.strings[s] = struct{}{}
			continue
		}
		set.keys[string(appendKey(nil, nil, v))] = struct{}{}
	}
	return set
}

// has reports whether v is one of the set's values.
func (set *valueSet) has(bud *budget, v any) bool {
	t := typeOf(v)
	if set.types&t == 0 {
		return false
	}
	if s, ok := v.(string); ok {
		bud.spendBytes(len(s), 64)
		_, found := set.strings[s]
		return found
	}
	var arr [64]byte
	_, found := set.keys[string(appendKey(bud, arr[:0], v))]
	return found
}

// duplicates are the first two equal items of arr, by the later one's
// index: (-1, -1) when all differ.
func duplicates(bud *budget, arr []any) (int, int) {
	seen := make(map[string]int, len(arr))
	var buf []byte
	for i, item := range arr {
		bud.spend(4) // a map's insertion
		buf = appendKey(bud, buf[:0], item)
		if j, found := seen[string(buf)]; found {
			return j, i
		}
		seen[string(buf)] = i
	}
	return -1, -1
}
