package toolschema

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An evaluation fails where the validator's own Validate fails, with the
// same kinds at the same places, and the words made of them are the same.
// (Run once against the JSON-Schema-Test-Suite's drafts 4 to 2020-12, 7,456
// cases, it differed on none; what Compile refuses aside.)

// failures writes a failure's tree as a sorted list of its nodes: where,
// what kind (with its values, for a leaf), from which schema.
func failures(e *jsonschema.ValidationError) []string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		node := fmt.Sprintf("%s %T %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind, e.SchemaURL)
		if len(e.Causes) == 0 {
			node += fmt.Sprintf(" %v", e.ErrorKind)
		}
		out = append(out, node)
		for _, c := range e.Causes {
			walk(c)
		}
	}
	if e != nil {
		walk(e)
	}
	slices.Sort(out)
	return out
}

// agree checks args against s both ways, and says how they differ.
func agree(t testing.TB, s *Schema, args []byte) {
	t.Helper()
	inst, err := decode(args)
	if err != nil {
		return
	}
	var theirs *jsonschema.ValidationError
	if err := s.sch.Validate(inst); err != nil {
		require.ErrorAs(t, err, &theirs)
	}
	e := evaluation{s: s, budget: budgetFor(t.Context(), MaxSteps)}
	ours := e.validate(s.sch, inst, false)
	assert.Equal(t, failures(theirs), failures(ours), "%s", args)
	// Problems at one path come in the order of a map, either way.
	assert.ElementsMatch(t, s.words(budgetFor(t.Context(), MaxSteps), inst, theirs), s.words(budgetFor(t.Context(), MaxSteps), inst, ours),
		"the words of the <validation_error>: %s", args)
	e = evaluation{s: s, budget: budgetFor(t.Context(), MaxSteps)}
	assert.Equal(t, ours == nil, e.validate(s.sch, inst, true) == nil, "valid, without the words: %s", args)
}

// keywords uses every keyword an evaluation reads, in the ways they
// combine.
var keywords = []struct {
	schema string
	args   []string
}{
	{`{"type":"object","properties":{"a":{"type":"integer","minimum":2,"exclusiveMaximum":10,"multipleOf":2}},"required":["a","b"],"additionalProperties":{"type":"string"}}`,
		[]string{`{"a":4,"b":"x"}`, `{"a":3}`, `{"a":1.0,"b":1,"c":2}`, `{"a":10,"z":null}`, `[]`, `{"a":4.5}`}},
	{`{"type":"array","prefixItems":[{"const":1},{"enum":["x",{"k":[1,2]}]}],"items":{"type":"string"},"minItems":2,"maxItems":4,"uniqueItems":true,"contains":{"type":"string"},"minContains":2,"maxContains":3}`,
		[]string{`[1,"x","a","b"]`, `[1,{"k":[1,2.0]},"a","a"]`, `[2]`, `[1,"y",3,"a","b","c"]`, `[1,"x","a","b","c"]`}},
	{`{"anyOf":[{"type":"string","minLength":2},{"type":"number"}],"oneOf":[{"maximum":5},{"minimum":3}],"not":{"const":4}}`,
		[]string{`"é"`, `"ab"`, `4`, `3`, `7`, `1`, `true`}},
	{`{"if":{"properties":{"kind":{"const":"user"}}},"then":{"required":["id"]},"else":{"required":["name"]},"dependentRequired":{"card":["billing"]},"dependentSchemas":{"x":{"maxProperties":2}}}`,
		[]string{`{"kind":"user"}`, `{"kind":"team","id":1}`, `{"kind":"user","id":1,"card":1}`, `{"x":1,"y":2,"name":1}`}},
	{`{"type":"object","properties":{"a":{}},"patternProperties":{"^x-":{"type":"integer"},"[0-9]$":{"type":"string"},"(?i)^Y":{"maxLength":1}},"unevaluatedProperties":false,"propertyNames":{"maxLength":5}}`,
		[]string{`{"a":1,"x-1":1,"x-2":"s","b9":"s","y":"ab","Yz":"a","toolong":1,"q":1}`, `{"x-":2}`}},
	{`{"allOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}],"anyOf":[{"properties":{"c":{}}},{"properties":{"d":{}}}],"unevaluatedProperties":false}`,
		[]string{`{"a":1,"b":2,"c":3,"d":4}`, `{"a":1,"e":5}`}},
	{`{"type":"array","prefixItems":[{"type":"integer"}],"contains":{"const":"c"},"unevaluatedItems":false}`,
		[]string{`[1,"c","c"]`, `[1,"c","d"]`, `["x"]`}},
	{`{"$defs":{"pos":{"type":"integer","exclusiveMinimum":0},"node":{"type":"object","properties":{"v":{"$ref":"#/$defs/pos"},"next":{"$ref":"#/$defs/node"}}}},"$ref":"#/$defs/node","format":"email"}`,
		[]string{`{"v":1,"next":{"v":0,"next":{"v":-1}}}`, `{"v":"x"}`}},
	{`{"type":"object","properties":{"r":{"type":"string","format":"regex"},"d":{"type":"string","format":"date"},"u":{"format":"uuid"},"p":{"type":"string","pattern":"^[a-z]+$"}}}`,
		[]string{`{"r":"[a-","d":"2026-13-01","u":"x","p":"A"}`, `{"r":"^a+$","d":"2026-07-28","u":"123e4567-e89b-12d3-a456-426614174000","p":"a"}`}},
	{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"maximum":5,"exclusiveMaximum":true},"t":{"items":[{"type":"string"}],"additionalItems":false}},"dependencies":{"a":["b"],"c":{"required":["d"]}}}`,
		[]string{`{"n":5,"t":["a",1],"a":1,"c":1}`, `{"n":4,"t":["a"]}`}},
	{`{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","propertyNames":{"pattern":"^[a-z]$"},"contains":{"type":"string"},"properties":{"e":{"$ref":"#/definitions/e","type":"string"}},"definitions":{"e":{"enum":[1,2]}}}`,
		[]string{`{"ab":1,"e":3}`, `{"e":1}`}},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","items":{"type":"integer"},"additionalItems":false,"if":{"minItems":2},"then":{"maxItems":3}}`,
		[]string{`[1,2,3,4]`, `[1,"x"]`, `[]`}},
	{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		[]string{`{}`}},
	{`false`, []string{`{}`}},
	{`true`, []string{`{}`, `[1]`}},
}

func TestEvaluationFailsAsTheValidatorDoes(t *testing.T) {
	for _, group := range []struct {
		schema string
		cases  []struct{ name, args string }
	}{{invoice, wordingCases}, {extras, extrasCases}, {draft07, draft07Cases}} {
		s, err := Compile([]byte(group.schema))
		require.NoError(t, err)
		for _, c := range group.cases {
			agree(t, s, []byte(c.args))
		}
	}
	for _, k := range keywords {
		s, err := Compile([]byte(k.schema))
		require.NoError(t, err, k.schema)
		for _, args := range k.args {
			agree(t, s, []byte(args))
		}
	}
}

func FuzzEvaluationAgrees(f *testing.F) {
	var schemas []*Schema
	for _, k := range keywords {
		s, err := Compile([]byte(k.schema))
		require.NoError(f, err)
		schemas = append(schemas, s)
		for _, args := range k.args {
			f.Add([]byte(args))
		}
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, s := range schemas {
			agree(t, s, args)
		}
	})
}

func TestWhatEvaluationsDoNotDoDoesNotCompile(t *testing.T) {
	for schema, why := range map[string]string{
		`{"$defs":{"t":{"$dynamicAnchor":"t"}},"properties":{"a":{"$dynamicRef":"#t"}}}`:                                   "$dynamicRef",
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"items":{"$recursiveRef":"#"}}`: "$recursiveRef",
		fanningSchema("oneOf", 10, `{}`): "over 1000 schemas",
		`{"type":"object","properties":{"a":{"pattern":"` + strings.Repeat("a", maxPattern+1) + `"}}}`:                                                   "over the 4096 compiled",
		`{"type":"object","properties":{"a":{"pattern":"[a-z]{999}[0-9]{999}[A-Z]{999}[a-f]{999}[0-5]{999}"}}}`:                                          "instructions",
		`{"type":"object","patternProperties":` + members(5, func(i int) string { return fmt.Sprintf(`"%d%s":{}`, i, strings.Repeat("x", 4000)) }) + `}`: "in all",
	} {
		_, err := Compile([]byte(schema))
		assert.ErrorContains(t, err, why, "%.80s", schema)
	}
	_, err := Compile([]byte(fanningSchema("oneOf", 7, `{}`)))
	assert.NoError(t, err, "510 schemas on one value")
}

// The "regex" format is the validator's verdict (Go's regexp compiles the
// string), within a bound on its length.
func TestRegexFormatIsBounded(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","properties":{"r":{"type":"string","format":"regex"}}}`))
	require.NoError(t, err)
	assert.Nil(t, mustCheck(t, s, []byte(`{"r":"^[a-z]+\\d{2}$"}`)))
	problems := mustCheck(t, s, []byte(`{"r":"[a-"}`))
	require.Len(t, problems, 1)
	assert.Equal(t, "Invalid regex format", problems[0].Problem)
	problems, err = s.Check(t.Context(), []byte(`{"r":"`+strings.Repeat("a", maxRegexFormat+1)+`"}`))
	assert.ErrorIs(t, err, ErrOverBudget)
	assert.Nil(t, problems)
}

func TestPatternsAreIndexedByTheirLiteral(t *testing.T) {
	pc := &patternCompiler{}
	for expr, prefix := range map[string]string{
		`^x-`: "x-", `^ab(c|d)`: "ab", `^x$`: "x", `x-`: "", `(?i)^x`: "", `^[a-z]`: "", `^(ab)`: "", `^\x{FFFD}a`: "",
	} {
		re, err := pc.compile(expr)
		require.NoError(t, err)
		assert.Equal(t, prefix, re.(*pattern).prefix, expr)
	}
}
