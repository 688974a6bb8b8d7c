// Package toolschema checks a tool call's arguments against the tool's
// inputSchema, as the MCP server advertised it in tools/list, and words each
// problem for the model that made the call: one envelope.FieldProblem per
// field, in the §6 form ("Expected one of: draft, sent, paid", "Unknown
// field 'emial'. … Did you mean 'email'?"), never a validator's keyword
// dump.
//
// The validator is github.com/santhosh-tekuri/jsonschema/v6: it supports
// every draft MCP servers write (2020-12 by default, draft-07 and older when
// $schema says so), asserts formats, and reports each failure as a typed
// kind with its values (the missing names, the allowed values, the bound),
// from which the words are made. google/jsonschema-go, which the Go SDK
// uses, reports failures as strings only.
//
// A schema is compiled once and never loads anything: a $ref outside the
// schema itself fails to compile (a hostile server must not make the
// gateway fetch URLs or read files), and so does a schema over MaxSchema
// bytes.
//
// The validator compiles; the gateway evaluates (eval.go), on a budget of
// steps that follows the bytes of the arguments (budget.go), whatever the
// schema: a check that would cost more stops, and so does one whose
// client left.
package toolschema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// MaxSchema bounds the inputSchema compiled, in bytes.
const MaxSchema = 64 << 10

// maxSchemaDepth bounds a schema's nesting: compiling grows much faster
// than its size with depth (a hostile server's "not" nested 2000 deep took
// seconds).
const maxSchemaDepth = 64

// MaxProblems bounds the fields one answer names.
const MaxProblems = 10

// Schema is a compiled inputSchema.
type Schema struct {
	sch *jsonschema.Schema
	// doc is the schema as decoded, for the names of the fields a path
	// allows (suggestions for unknown ones).
	doc any
	// blind: no keyword anywhere in the schema reads a string's content
	// (only its type), so a call's strings need not be decoded to be
	// checked: CheckCall reads them as "" first, and decodes them only for
	// the words of a call that fails.
	blind bool
	// enums and patterns are the enum sets and patternProperties indexes
	// of the schemas sch leads to (plan).
	enums    map[*jsonschema.Schema]*valueSet
	patterns map[*jsonschema.Schema]*patternIndex
}

// schemaURL names the schema being compiled; nothing is loaded from it or
// from any address relative to it.
const schemaURL = "https://caddy-mcp.invalid/input-schema.json"

// Compile compiles an inputSchema: 2020-12 unless its $schema names
// another draft, formats asserted.
func Compile(raw []byte) (*Schema, error) {
	if len(raw) > MaxSchema {
		return nil, fmt.Errorf("inputSchema of %d bytes, over the %d compiled", len(raw), MaxSchema)
	}
	doc, err := decodeDepth(raw, maxSchemaDepth)
	if err != nil {
		return nil, fmt.Errorf("inputSchema is not JSON, or nested deeper than %d: %w", maxSchemaDepth, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	c.UseRegexpEngine((&patternCompiler{}).compile)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, err
	}
	s := &Schema{sch: sch, doc: doc, blind: readsNoString(sch, map[*jsonschema.Schema]bool{})}
	if err := s.plan(); err != nil {
		return nil, err
	}
	return s, nil
}

// readsNoString reports whether no keyword of s, or of any schema s leads
// to, depends on a string's content: whether every string could be "" and
// each keyword's outcome stay the same. Member names are not strings here:
// they are always decoded. It answers false for what it cannot follow
// (dynamic and recursive references, the validator's extensions).
func readsNoString(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) bool {
	if s == nil || seen[s] {
		return true
	}
	seen[s] = true
	if s.Enum != nil || s.Const != nil || s.Format != nil || s.UniqueItems ||
		s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil ||
		s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil ||
		s.DynamicRef != nil || s.RecursiveRef != nil || len(s.Extensions) > 0 {
		return false
	}
	all := func(list []*jsonschema.Schema) bool {
		for _, sub := range list {
			if !readsNoString(sub, seen) {
				return false
			}
		}
		return true
	}
	anySchema := func(v any) bool {
		switch v := v.(type) {
		case *jsonschema.Schema:
			return readsNoString(v, seen)
		case []*jsonschema.Schema:
			return all(v)
		}
		return true // nil, a bool, or a dependency's names
	}
	if !all([]*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems}) ||
		!all(s.AllOf) || !all(s.AnyOf) || !all(s.OneOf) || !all(s.PrefixItems) ||
		!anySchema(s.AdditionalProperties) || !anySchema(s.Items) || !anySchema(s.AdditionalItems) {
		return false
	}
	for _, sub := range s.Properties {
		if !readsNoString(sub, seen) {
			return false
		}
	}
	for _, sub := range s.PatternProperties {
		if !readsNoString(sub, seen) {
			return false
		}
	}
	for _, sub := range s.DependentSchemas {
		if !readsNoString(sub, seen) {
			return false
		}
	}
	for _, dep := range s.Dependencies {
		if !anySchema(dep) {
			return false
		}
	}
	return true
}

// noLoader loads nothing.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("a schema may only refer to itself")
}

// Check validates a call's arguments (a JSON object; absent counts as {})
// and returns what is wrong, nil when nothing is. Arguments that are not
// JSON are one problem at the root. A check that would cost more than its
// budget stops with ErrOverBudget, one whose context is done with the
// context's error: the arguments were not checked.
func (s *Schema) Check(ctx context.Context, args []byte) ([]envelope.FieldProblem, error) {
	b := budgetFor(ctx, len(args))
	return guarded(func() []envelope.FieldProblem {
		b.affordsReading(args)
		if len(bytes.TrimSpace(args)) == 0 {
			return s.check(b, map[string]any{})
		}
		inst, err := decodeOn(b, args)
		if err != nil {
			return decodeProblem(err)
		}
		return s.check(b, inst)
	})
}

var (
	notJSON     = []envelope.FieldProblem{{Problem: "The arguments are not valid JSON", Expected: "Expected a JSON object."}}
	numberRange = []envelope.FieldProblem{{Problem: "A number is out of range", Expected: "Expected numbers a 64-bit float holds, written in at most 64 characters."}}
)

func decodeProblem(err error) []envelope.FieldProblem {
	if errors.Is(err, ErrNumberRange) {
		return numberRange
	}
	return notJSON
}

// CheckCall checks the arguments of the tools/call a JSON-RPC message body
// holds (absent arguments count as {}), as Check does, decoding the body
// once, on a budget that follows the body's size.
func (s *Schema) CheckCall(ctx context.Context, body []byte) ([]envelope.FieldProblem, error) {
	b := budgetFor(ctx, len(body))
	return guarded(func() []envelope.FieldProblem {
		b.affordsReading(body)
		if s.blind {
			// Strings read as "": a call that passes so passes as
			// written. One that does not (or is not JSON) is read again
			// in full, for the words of its problems.
			if args, err := decodeArguments(b, body); err == nil {
				if args == nil {
					args = map[string]any{}
				}
				if s.passes(b, args) {
					return nil
				}
			}
		}
		msg, err := decodeOn(b, body)
		if err != nil {
			return decodeProblem(err)
		}
		return s.check(b, callArguments(msg))
	})
}

// guarded runs a check: one that stops returns why, and a panic is a
// problem at the root, not a crashed request.
func guarded(check func() []envelope.FieldProblem) (problems []envelope.FieldProblem, err error) {
	defer func() {
		switch v := recover().(type) {
		case nil:
		case stopped:
			problems, err = nil, v.err
		default:
			problems, err = []envelope.FieldProblem{{Problem: fmt.Sprintf("The arguments could not be checked (%v)", v)}}, nil
		}
	}()
	return check(), nil
}

// callArguments is params.arguments of a decoded tools/call ({} when absent
// or null).
func callArguments(msg any) any {
	if m, ok := msg.(map[string]any); ok {
		if params, ok := m["params"].(map[string]any); ok {
			// Null arguments are none, as the SDK servers read them.
			if a, ok := params["arguments"]; ok && a != nil {
				return a
			}
		}
	}
	return map[string]any{}
}

// passes says whether inst is valid, without the words.
func (s *Schema) passes(b *budget, inst any) bool {
	e := evaluation{s: s, budget: b}
	return e.validate(s.sch, inst, true) == nil
}

// check validates decoded arguments, and words what fails.
func (s *Schema) check(b *budget, inst any) []envelope.FieldProblem {
	e := evaluation{s: s, budget: b}
	return s.words(b, inst, e.validate(s.sch, inst, false))
}

// words are the problems a failure of inst is worded in, nil for none.
func (s *Schema) words(b *budget, inst any, ve *jsonschema.ValidationError) []envelope.FieldProblem {
	if ve == nil {
		return nil
	}
	c := collector{s: s, inst: inst, budget: b}
	c.walk(ve)
	// The validator's order follows maps: sorted by path, the answer is the
	// same for the same call.
	slices.SortStableFunc(c.problems, func(a, b problem) int { return strings.Compare(a.Path, b.Path) })
	kept := make([]envelope.FieldProblem, 0, min(len(c.problems), MaxProblems))
	for _, p := range c.problems[:cap(kept)] {
		if p.sent {
			p.Sent = c.sent(p.loc)
		}
		if p.expect != nil {
			p.Expected = p.expect()
		}
		kept = append(kept, p.FieldProblem)
	}
	c.suggest(kept)
	return kept
}

// maxCollected bounds the problems gathered before the first MaxProblems
// (by path) are kept.
const maxCollected = 1000

type collector struct {
	s        *Schema
	inst     any
	budget   *budget
	problems []problem
	seen     map[string]bool // path and problem, once each
	unknown  map[string]unknownField
}

// problem is a problem found, and where: what was sent there, and what
// a long list of allowed values expects, are written for the problems kept
// only (a call may break thousands of keywords, at the root of a large
// value).
type problem struct {
	envelope.FieldProblem
	loc    []string
	sent   bool          // the problem says what was sent at loc
	expect func() string // what it expects, when not Expected
}

// unknownField is where an unknown field was met, for its suggestion.
type unknownField struct {
	parent []string
	name   string
}

// suggest fills in what to expect instead of each unknown field kept.
func (c *collector) suggest(problems []envelope.FieldProblem) {
	for i := range problems {
		u, ok := c.unknown[problems[i].Path]
		if !ok || problems[i].Expected != "" || !strings.HasPrefix(problems[i].Problem, "Unknown field") {
			continue
		}
		known := c.s.fieldsAt(u.parent)
		switch near := nearest(c.budget, u.name, known); {
		case near != "":
			problems[i].Expected = "Did you mean '" + near + "'?"
		case len(known) > 0:
			problems[i].Expected = "Expected only: " + strings.Join(known, ", ") + "."
		default:
			problems[i].Expected = "Remove it."
		}
	}
}

// walk collects the leaves of a failure: the keywords that failed where
// they failed, not the schemas that contained them.
func (c *collector) walk(e *jsonschema.ValidationError) {
	c.budget.spend(1)
	if isContainer(e.ErrorKind) {
		for _, cause := range e.Causes {
			c.walk(cause)
		}
		return
	}
	k := e.ErrorKind
	switch k := k.(type) {
	case *kind.AnyOf:
		if c.walkBranches(e) {
			return
		}
	case *kind.OneOf:
		if len(k.Subschemas) == 0 && c.walkBranches(e) {
			return
		}
	}
	switch k.(type) {
	case *kind.Not, *kind.FalseSchema:
		// additionalProperties: {"not": {}} (what the Go SDK writes for
		// a struct) or false, or unevaluatedProperties: false, met by a
		// field: an unknown field.
		if n := len(e.InstanceLocation); n > 0 && (strings.HasSuffix(e.SchemaURL, "/additionalProperties") || strings.HasSuffix(e.SchemaURL, "/unevaluatedProperties")) {
			k = &kind.AdditionalProperties{Properties: []string{e.InstanceLocation[n-1]}}
			e = &jsonschema.ValidationError{InstanceLocation: e.InstanceLocation[:n-1]}
		}
	}
	for _, p := range c.word(e.InstanceLocation, k) {
		c.add(p)
	}
}

// wordSteps are what a problem costs to word.
const wordSteps = 4

// add keeps a problem, once, up to maxCollected.
func (c *collector) add(p problem) {
	c.budget.spend(wordSteps)
	if len(c.problems) == maxCollected {
		return
	}
	key := p.Path + "\x00" + p.Problem
	if c.seen[key] {
		return
	}
	if c.seen == nil {
		c.seen = make(map[string]bool)
	}
	c.seen[key] = true
	c.problems = append(c.problems, p)
}

// walkBranches words an anyOf or a oneOf that no branch matched by what
// its branches say, when they say something plain, and reports whether
// they did: branches that differ only by type (["string", "null"], as a
// pydantic Optional writes) make one "Wrong type" naming every type; a
// single branch whose type fits the value (the one member of a union of
// objects a value claims to be) is walked, so that the model learns which
// of its fields failed rather than that no shape fitted.
func (c *collector) walkBranches(e *jsonschema.ValidationError) bool {
	var types []string
	var fits []*jsonschema.ValidationError
	for _, branch := range e.Causes {
		leaf := branch
		for len(leaf.Causes) == 1 && isContainer(leaf.ErrorKind) {
			leaf = leaf.Causes[0]
		}
		if t, ok := leaf.ErrorKind.(*kind.Type); ok && slices.Equal(leaf.InstanceLocation, e.InstanceLocation) {
			types = append(types, t.Want...)
			continue
		}
		fits = append(fits, branch)
	}
	switch {
	case len(fits) == 0 && len(types) > 0:
		slices.Sort(types)
		for _, p := range c.word(e.InstanceLocation, &kind.Type{Want: slices.Compact(types)}) {
			c.add(p)
		}
		return true
	case len(fits) == 1:
		c.walk(fits[0])
		return true
	}
	return false
}

// isContainer reports whether an error of kind k only holds the errors of
// the keywords under it.
func isContainer(k jsonschema.ErrorKind) bool {
	switch k.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		return true
	}
	return false
}

// word turns one failed keyword at loc into problems, one per field.
func (c *collector) word(loc []string, k jsonschema.ErrorKind) []problem {
	at := func(words, expected string) []problem {
		return []problem{{FieldProblem: envelope.FieldProblem{Path: path(loc), Problem: words, Expected: expected}, loc: loc, sent: true}}
	}
	switch k := k.(type) {
	case *kind.Required:
		out := make([]problem, 0, len(k.Missing))
		for _, name := range k.Missing {
			out = append(out, problem{FieldProblem: envelope.FieldProblem{Path: path(append(slices.Clip(loc), name)), Problem: "Missing required field", Expected: c.expectedType(append(slices.Clip(loc), name))}})
		}
		return out
	case *kind.DependentRequired:
		return c.missingWith(loc, k.Prop, k.Missing)
	case *kind.Dependency:
		return c.missingWith(loc, k.Prop, k.Missing)
	case *kind.AdditionalProperties:
		// What to expect instead is worked out for the fields kept only
		// (suggest): a call may name thousands.
		// Past maxCollected, add keeps none: none is worded.
		names := k.Properties[:min(len(k.Properties), maxCollected-len(c.problems))]
		c.budget.spend(wordSteps * (len(k.Properties) - len(names)))
		out := make([]problem, 0, len(names))
		for _, name := range names {
			field := append(slices.Clip(loc), name)
			p := problem{FieldProblem: envelope.FieldProblem{Path: path(field), Problem: "Unknown field '" + name + "'"}, loc: field, sent: true}
			if c.unknown == nil {
				c.unknown = make(map[string]unknownField)
			}
			c.unknown[p.Path] = unknownField{parent: slices.Clip(loc), name: name}
			out = append(out, p)
		}
		return out
	case *kind.Type:
		return at("Wrong type", "Expected "+typeWords(k.Want)+".")
	case *kind.Enum:
		p := at("Not an allowed value", "")
		p[0].expect = func() string { return "Expected one of: " + valueList(k.Want) + "." }
		return p
	case *kind.Const:
		p := at("Not the allowed value", "")
		p[0].expect = func() string { return "Expected exactly: " + value(k.Want) + "." }
		return p
	case *kind.Format:
		return at("Invalid "+k.Want+" format", formatWords(k.Want))
	case *kind.MinLength:
		return at("Too short", "Expected at least "+count(k.Want, "character")+".")
	case *kind.MaxLength:
		return at("Too long", "Expected at most "+count(k.Want, "character")+".")
	case *kind.Pattern:
		return at("Does not match the required pattern", "Expected text matching the pattern "+k.Want+".")
	case *kind.Minimum:
		return at("Too small", "Expected at least "+number(k.Want)+".")
	case *kind.Maximum:
		return at("Too large", "Expected at most "+number(k.Want)+".")
	case *kind.ExclusiveMinimum:
		return at("Too small", "Expected more than "+number(k.Want)+".")
	case *kind.ExclusiveMaximum:
		return at("Too large", "Expected less than "+number(k.Want)+".")
	case *kind.MultipleOf:
		return at("Not a multiple of "+number(k.Want), "Expected a multiple of "+number(k.Want)+".")
	case *kind.MinItems:
		return at("Too few items", "Expected at least "+count(k.Want, "item")+".")
	case *kind.MaxItems:
		return at("Too many items", "Expected at most "+count(k.Want, "item")+".")
	case *kind.UniqueItems:
		return at("Duplicate items", fmt.Sprintf("Expected every item to differ: items %d and %d are equal.", k.Duplicates[0], k.Duplicates[1]))
	case *kind.MinProperties:
		return at("Too few fields", "Expected at least "+count(k.Want, "field")+".")
	case *kind.MaxProperties:
		return at("Too many fields", "Expected at most "+count(k.Want, "field")+".")
	case *kind.AdditionalItems:
		return at("Too many items", "Expected no items beyond those the schema lists.")
	case *kind.Contains, *kind.MinContains:
		return at("No item of the required kind", "Expected at least one item matching the schema.")
	case *kind.MaxContains:
		return at("Too many items of one kind", "Expected fewer items matching the schema.")
	case *kind.PropertyNames:
		return at("Invalid field name '"+k.Property+"'", "Expected field names the schema allows.")
	case *kind.AnyOf:
		return at("Matches none of the allowed shapes", "Expected a value matching at least one of the shapes in the tool's schema.")
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			return at(fmt.Sprintf("Matches %d of the allowed shapes, where only one may match", len(k.Subschemas)), "Expected a value matching exactly one of the shapes in the tool's schema.")
		}
		return at("Matches none of the allowed shapes", "Expected a value matching exactly one of the shapes in the tool's schema.")
	case *kind.Not:
		return at("Not allowed", "Expected a value the tool's schema does not exclude.")
	case *kind.FalseSchema:
		return at("Not allowed here", "Remove it.")
	}
	return at("Invalid value", "")
}

// missingWith words the fields missing because prop was given.
func (c *collector) missingWith(loc []string, prop string, missing []string) []problem {
	out := make([]problem, 0, len(missing))
	for _, name := range missing {
		out = append(out, problem{FieldProblem: envelope.FieldProblem{Path: path(append(slices.Clip(loc), name)), Problem: "Missing field, required when '" + prop + "' is given"}})
	}
	return out
}

// path writes a location as the §6 form does: dot-separated, "" for the
// root.
func path(loc []string) string { return strings.Join(loc, ".") }

// sent is the JSON at loc in the instance, nil when there is none: as
// decoded and written again (an object's fields sorted by name), with <, >
// and & as sent rather than escaped for HTML. It may be all of the
// arguments, for each of the problems kept, and is read again to be
// worded: its bytes are paid from the budget before it is written.
func (c *collector) sent(loc []string) json.RawMessage {
	v, ok := lookup(c.inst, loc)
	if !ok {
		return nil
	}
	c.budget.spend(weigh(v, c.budget.left*sentBytesPerStep) / sentBytesPerStep)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// sentBytesPerStep are the bytes of what was sent written, and read
// again, in a step.
const sentBytesPerStep = 4

// weigh is about how many bytes v is written in, counted up to limit.
func weigh(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, m := range v {
				if n > limit {
					return
				}
				n += len(k) + 4
				walk(m)
			}
		case []any:
			for _, item := range v {
				if n > limit {
					return
				}
				n++
				walk(item)
			}
		case string:
			n += len(v) + 2
		case json.Number:
			n += len(v)
		}
		n += 2
	}
	walk(v)
	return n
}

func lookup(v any, loc []string) (any, bool) {
	for _, seg := range loc {
		switch t := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = t[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
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
