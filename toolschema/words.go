package toolschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// phrase words a failed keyword that is not about fields: what is wrong
// with the value, and what was expected of it.
func phrase(k jsonschema.ErrorKind) (words, expected string) {
	switch k := k.(type) {
	case *kind.Type:
		return "Wrong type", "Expected " + typeWords(k.Want) + "."
	case *kind.Format:
		return "Invalid " + k.Want + " format", formatWords(k.Want)
	case *kind.MinLength:
		return "Too short", "Expected at least " + count(k.Want, "character") + "."
	case *kind.MaxLength:
		return "Too long", "Expected at most " + count(k.Want, "character") + "."
	case *kind.Pattern:
		return "Does not match the required pattern", "Expected text matching the pattern " + k.Want + "."
	case *kind.Minimum:
		return "Too small", "Expected at least " + number(k.Want) + "."
	case *kind.Maximum:
		return "Too large", "Expected at most " + number(k.Want) + "."
	case *kind.ExclusiveMinimum:
		return "Too small", "Expected more than " + number(k.Want) + "."
	case *kind.ExclusiveMaximum:
		return "Too large", "Expected less than " + number(k.Want) + "."
	case *kind.MultipleOf:
		return "Not a multiple of " + number(k.Want), "Expected a multiple of " + number(k.Want) + "."
	}
	return shapePhrase(k)
}

// shapePhrase words a failed keyword on a value's items, its fields, or
// the shapes it may take.
func shapePhrase(k jsonschema.ErrorKind) (words, expected string) {
	switch k := k.(type) {
	case *kind.MinItems:
		return "Too few items", "Expected at least " + count(k.Want, "item") + "."
	case *kind.MaxItems:
		return "Too many items", "Expected at most " + count(k.Want, "item") + "."
	case *kind.UniqueItems:
		return "Duplicate items", fmt.Sprintf("Expected every item to differ: items %d and %d are equal.", k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return "Too few fields", "Expected at least " + count(k.Want, "field") + "."
	case *kind.MaxProperties:
		return "Too many fields", "Expected at most " + count(k.Want, "field") + "."
	case *kind.AdditionalItems:
		return "Too many items", "Expected no items beyond those the schema lists."
	case *kind.Contains, *kind.MinContains:
		return "No item of the required kind", "Expected at least one item matching the schema."
	case *kind.MaxContains:
		return "Too many items of one kind", "Expected fewer items matching the schema."
	case *kind.PropertyNames:
		return "Invalid field name '" + k.Property + "'", "Expected field names the schema allows."
	case *kind.AnyOf:
		return "Matches none of the allowed shapes", "Expected a value matching at least one of the shapes in the tool's schema."
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			return fmt.Sprintf("Matches %d of the allowed shapes, where only one may match", len(k.Subschemas)), "Expected a value matching exactly one of the shapes in the tool's schema."
		}
		return "Matches none of the allowed shapes", "Expected a value matching exactly one of the shapes in the tool's schema."
	case *kind.Not:
		return "Not allowed", "Expected a value the tool's schema does not exclude."
	case *kind.FalseSchema:
		return "Not allowed here", "Remove it."
	}
	return "Invalid value", ""
}

var typeArticles = map[string]string{
	"string": "a string", "number": "a number", "integer": "an integer", "boolean": "a boolean",
	"object": "an object", "array": "an array", "null": "null",
}

// typeWords: "a string", "a string or null".
func typeWords(types []string) string {
	words := make([]string, 0, len(types))
	for _, t := range types {
		if w, ok := typeArticles[t]; ok {
			words = append(words, w)
		} else {
			words = append(words, t)
		}
	}
	return strings.Join(words, " or ")
}

// formatNames are the formats whose expectation reads better than "a
// valid <format>".
var formatNames = map[string]string{
	"email": "a valid email address", "idn-email": "a valid email address",
	"uri": "an absolute URI such as https://example.com/x", "uri-reference": "a URI reference",
	"iri": "an absolute IRI", "iri-reference": "an IRI reference",
	"date": "a date such as 2026-07-28", "date-time": "a date and time such as 2026-07-28T09:30:00Z",
	"time": "a time such as 09:30:00Z", "duration": "an ISO 8601 duration such as P1DT2H",
	"uuid": "a UUID such as 123e4567-e89b-12d3-a456-426614174000",
	"ipv4": "an IPv4 address such as 192.0.2.1", "ipv6": "an IPv6 address such as 2001:db8::1",
	"hostname": "a host name such as example.com", "idn-hostname": "a host name",
	"regex": "a regular expression", "json-pointer": "a JSON pointer such as /a/b",
	"relative-json-pointer": "a relative JSON pointer", "uri-template": "a URI template",
}

func formatWords(format string) string {
	if w, ok := formatNames[format]; ok {
		return "Expected " + w + "."
	}
	return "Expected a valid " + format + "."
}

// value writes one JSON value as the model would write it back: strings
// bare, the rest as JSON.
func value(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// valueList writes allowed values, at most 20 of them.
func valueList(vs []any) string {
	const most = 20
	words := make([]string, 0, min(len(vs), most))
	for i, v := range vs {
		if i == most {
			words = append(words, fmt.Sprintf("and %d more", len(vs)-most))
			break
		}
		words = append(words, value(v))
	}
	return strings.Join(words, ", ")
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// number writes a bound as JavaScript would (100, 0.5, 1e+21).
func number(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return string(envelope.AppendNumber(nil, f))
}

// expectedType is "Expected <a type>." for a field whose schema names one,
// or "Expected a value.".
func (c *collector) expectedType(loc []string) string {
	m, ok := c.s.schemaAt(loc)
	if !ok {
		return "Expected a value."
	}
	if enum, isList := m["enum"].([]any); isList && len(enum) > 0 {
		return "Expected one of: " + valueList(enum) + "."
	}
	switch t := m["type"].(type) {
	case string:
		return "Expected " + typeWords([]string{t}) + "."
	case []any:
		var names []string
		for _, n := range t {
			if s, isString := n.(string); isString {
				names = append(names, s)
			}
		}
		if len(names) > 0 {
			return "Expected " + typeWords(names) + "."
		}
	}
	return "Expected a value."
}

// schemaAt follows loc through the schema's properties and items, as far
// as the schema says plainly what a field is.
func (s *Schema) schemaAt(loc []string) (map[string]any, bool) {
	m, ok := s.doc.(map[string]any)
	for _, seg := range loc {
		if !ok {
			return nil, false
		}
		if props, isMap := m["properties"].(map[string]any); isMap {
			if next, found := props[seg].(map[string]any); found {
				m = next
				continue
			}
		}
		if _, err := strconv.Atoi(seg); err == nil {
			if next, found := m["items"].(map[string]any); found {
				m = next
				continue
			}
		}
		return nil, false
	}
	return m, ok
}

// Arguments are the names of the arguments the schema declares (its
// top-level properties), sorted.
func (s *Schema) Arguments() []string { return s.fieldsAt(nil) }

// fieldsAt are the field names the schema declares at loc, sorted.
func (s *Schema) fieldsAt(loc []string) []string {
	m, ok := s.schemaAt(loc)
	if !ok {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
