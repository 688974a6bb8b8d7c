package toolschema

import (
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxFanOut bounds the schemas one value is evaluated against in place
// (through $ref, allOf, anyOf, oneOf, not, if, then, else and the
// dependent schemas), counted as often as they are reached: combinators
// that each refer twice to the level below double the count at every
// level, and 18 levels (a schema of 1.2 KiB) made one empty object cost
// 262,144 evaluations. No hand-written schema comes near the bound.
const maxFanOut = 1000

// plan walks every schema a compiled schema leads to, indexes what an
// evaluation looks up (enum sets, patternProperties), and refuses what an
// evaluation does not do: $dynamicRef and $recursiveRef (their targets
// depend on the path taken, which the validator keeps to itself), and a
// fan-out over maxFanOut.
func (s *Schema) plan() error {
	s.enums = map[*jsonschema.Schema]*valueSet{}
	s.patterns = map[*jsonschema.Schema]*patternIndex{}
	seen := map[*jsonschema.Schema]bool{}
	queue := []*jsonschema.Schema{s.sch}
	for len(queue) > 0 {
		sch := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if sch == nil || seen[sch] {
			continue
		}
		seen[sch] = true
		if sch.DynamicRef != nil || sch.RecursiveRef != nil {
			return errors.New("$dynamicRef and $recursiveRef are not checked at the edge")
		}
		if sch.Enum != nil {
			s.enums[sch] = newValueSet(sch.Enum.Values)
		}
		if len(sch.PatternProperties) > 0 {
			s.patterns[sch] = newPatternIndex(sch.PatternProperties)
		}
		queue = append(queue, subschemas(sch)...)
	}
	fan := fanOut{counts: map[*jsonschema.Schema]int{}, open: map[*jsonschema.Schema]bool{}}
	for sch := range seen {
		if n := fan.count(sch); n > maxFanOut {
			return fmt.Errorf("combinators evaluate one value against over %d schemas (at %s)", maxFanOut, sch.Location)
		}
	}
	return nil
}

// subschemas are the schemas sch refers to, each keyword's.
func subschemas(sch *jsonschema.Schema) []*jsonschema.Schema {
	out := append(inPlace(sch), sch.PropertyNames, sch.UnevaluatedProperties, sch.Contains,
		sch.Items2020, sch.UnevaluatedItems, sch.ContentSchema)
	out = append(out, sch.PrefixItems...)
	for _, sub := range sch.Properties {
		out = append(out, sub)
	}
	for _, sub := range sch.PatternProperties {
		out = append(out, sub)
	}
	for _, v := range []any{sch.AdditionalProperties, sch.Items, sch.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return out
}

// inPlace are the schemas sch evaluates its own value against.
func inPlace(sch *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{sch.Ref, sch.Not, sch.If, sch.Then, sch.Else}
	if sch.DynamicRef != nil {
		out = append(out, sch.DynamicRef.Ref)
	}
	out = append(out, sch.RecursiveRef)
	out = append(out, sch.AllOf...)
	out = append(out, sch.AnyOf...)
	out = append(out, sch.OneOf...)
	for _, sub := range sch.DependentSchemas {
		out = append(out, sub)
	}
	for _, dep := range sch.Dependencies {
		if sub, ok := dep.(*jsonschema.Schema); ok {
			out = append(out, sub)
		}
	}
	return out
}

// fanOut counts the evaluations of one value in place that a schema
// leads to, itself included, up to maxFanOut+1. A schema met again on its
// own path ends there (the validator reports a reference cycle).
type fanOut struct {
	counts map[*jsonschema.Schema]int
	open   map[*jsonschema.Schema]bool
}

func (f fanOut) count(sch *jsonschema.Schema) int {
	if sch == nil {
		return 0
	}
	if n, done := f.counts[sch]; done {
		return n
	}
	if f.open[sch] {
		return 1
	}
	f.open[sch] = true
	n := 1
	for _, sub := range inPlace(sch) {
		n = min(maxFanOut+1, n+f.count(sub))
	}
	delete(f.open, sch)
	f.counts[sch] = n
	return n
}
