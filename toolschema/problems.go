package toolschema

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/caddymcp/caddy-mcp/envelope"
)

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
	switch k := k.(type) {
	case *kind.Required:
		return c.missing(loc, k.Missing)
	case *kind.DependentRequired:
		return c.missingWith(loc, k.Prop, k.Missing)
	case *kind.Dependency:
		return c.missingWith(loc, k.Prop, k.Missing)
	case *kind.AdditionalProperties:
		return c.unknownFields(loc, k.Properties)
	case *kind.Enum:
		p := problemAt(loc, "Not an allowed value", "")
		p[0].expect = func() string { return "Expected one of: " + valueList(k.Want) + "." }
		return p
	case *kind.Const:
		p := problemAt(loc, "Not the allowed value", "")
		p[0].expect = func() string { return "Expected exactly: " + value(k.Want) + "." }
		return p
	}
	words, expected := phrase(k)
	return problemAt(loc, words, expected)
}

// problemAt is the one problem of the value at loc.
func problemAt(loc []string, words, expected string) []problem {
	return []problem{{FieldProblem: envelope.FieldProblem{Path: path(loc), Problem: words, Expected: expected}, loc: loc, sent: true}}
}

// missing words the required fields missing at loc.
func (c *collector) missing(loc []string, names []string) []problem {
	out := make([]problem, 0, len(names))
	for _, name := range names {
		out = append(out, problem{FieldProblem: envelope.FieldProblem{Path: path(append(slices.Clip(loc), name)), Problem: "Missing required field", Expected: c.expectedType(append(slices.Clip(loc), name))}})
	}
	return out
}

// unknownFields words the fields at loc the schema does not allow. What
// to expect instead is worked out for the fields kept only (suggest): a
// call may name thousands.
func (c *collector) unknownFields(loc []string, properties []string) []problem {
	// Past maxCollected, add keeps none: none is worded.
	names := properties[:min(len(properties), maxCollected-len(c.problems))]
	c.budget.spend(wordSteps * (len(properties) - len(names)))
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
