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
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

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
	switch {
	case errors.Is(err, ErrTwoWays):
		return nil, fmt.Errorf("inputSchema is read two ways by the SDKs: %w", err)
	case err != nil:
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
	var twice twoWays
	switch {
	case errors.Is(err, ErrNumberRange):
		return numberRange
	case errors.As(err, &twice):
		return []envelope.FieldProblem{{
			Problem:  "Field '" + clipKey(twice.key) + "' is given twice, or again in another letter case",
			Expected: "Expected each field once, spelled one way.",
		}}
	}
	return notJSON
}

// clipKey is a key cut to its first 47 characters and "..." when longer
// than 50, as the values a call sent are.
func clipKey(key string) string {
	if utf8.RuneCountInString(key) <= 50 {
		return key
	}
	n := 0
	for i := range key {
		if n == 47 {
			return key[:i] + "..."
		}
		n++
	}
	return key
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
			if args, err := decodeArguments(b, body, true); err == nil {
				if args == nil {
					args = map[string]any{}
				}
				if s.passes(b, args) {
					return nil
				}
			}
		}
		args, err := decodeArguments(b, body, false)
		if err != nil {
			return decodeProblem(err)
		}
		if args == nil {
			args = map[string]any{} // null arguments are none, as the SDK servers read them
		}
		return s.check(b, args)
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
