package toolschema

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// An evaluation checks decoded arguments against a compiled schema as the
// validator's own Validate does (jsonschema v6, validator.go): the same
// keywords in the same order, failing with the same kinds at the same
// places, so that the same words are made of them. The validator compiles;
// this evaluates, where the validator's cost does not follow the bytes of
// the arguments:
//
//   - every step is paid from the check's budget, and the request's
//     context is polled between steps (budget.go);
//   - an enum is a set of keys rather than a list compared item by item,
//     numbers are read as exact decimals and made big.Rats only to be
//     compared with a bound (values.go);
//   - a patternProperties is an index of its patterns, and the "regex"
//     format parses a string once per check, within bounds (regexp.go).
//
// Compile refuses what an evaluation does not do: $dynamicRef and
// $recursiveRef, and combinators that fan out (plan.go).
type evaluation struct {
	s      *Schema
	budget *budget
	// scopes are the schemas being evaluated, outermost first, each with
	// the depth of the value it evaluates; those from floor up belong to
	// the current root (a field name checked against propertyNames is a
	// root of its own).
	scopes []scope
	floor  int
	// regexes are the "regex" format's verdicts on the strings met.
	regexes map[string]error
}

type scope struct {
	sch *jsonschema.Schema
	vid int
	// keyword is the reference that led to sch ($ref), "" when sch is
	// where its parent holds it.
	keyword string
}

type validationError = jsonschema.ValidationError

// validate evaluates v against sch, as the root of a check: nil when v is
// valid, else the failure as Schema.Validate returns it. With boolResult,
// only whether it fails matters: failures carry no words.
func (e *evaluation) validate(sch *jsonschema.Schema, v any, boolResult bool) *validationError {
	root := frame{e: e, v: v, vloc: make([]step, 0, 8), sch: sch, boolResult: boolResult}
	root.uneval = unevalFrom(e.budget, v, sch, false)
	_, err := e.run(&root)
	if err == nil {
		return nil
	}
	causes := []*validationError{err}
	if _, ok := err.ErrorKind.(*kind.Group); ok {
		causes = err.Causes
	}
	return &validationError{SchemaURL: sch.Location, ErrorKind: &kind.Schema{Location: sch.Location}, Causes: causes}
}

// maxNesting bounds the schemas under evaluation at once, in place and
// down the value, each a few hundred bytes of stack: arguments nested as
// deep as decode reads them (1,000), through a $ref at every level, grew
// the stack by megabytes.
const maxNesting = 256

func (e *evaluation) run(f *frame) (uneval, *validationError) {
	if len(e.scopes) == maxNesting {
		panic(stopped{ErrOverBudget})
	}
	e.scopes = append(e.scopes, scope{f.sch, f.vid, f.keyword})
	u, err := f.validate()
	e.scopes = e.scopes[:len(e.scopes)-1]
	return u, err
}

// cycle is the failure of the schema evaluated last when it is already
// being evaluated on the same value (a reference cycle), nil otherwise.
func (e *evaluation) cycle() *kind.RefCycle {
	top := len(e.scopes) - 1
	i := top - 1
	for i >= e.floor && e.scopes[i].vid == e.scopes[top].vid && e.scopes[i].sch != e.scopes[top].sch {
		i--
	}
	e.budget.spend((top - i) / 8)
	if i < e.floor || e.scopes[i].vid != e.scopes[top].vid {
		return nil
	}
	e.budget.spend(top)
	return &kind.RefCycle{URL: e.scopes[top].sch.Location, KeywordLocation1: e.keywordLocation(top), KeywordLocation2: e.keywordLocation(i)}
}

// keywordLocation is the path of keywords from the root to the schema of
// scopes[i].
func (e *evaluation) keywordLocation(i int) string {
	var loc string
	for ; i > e.floor; i-- {
		sc, parent := e.scopes[i], e.scopes[i-1]
		switch {
		case sc.keyword != "":
			loc = "/" + escapePointer(sc.keyword) + loc
		case strings.HasPrefix(sc.sch.Location, parent.sch.Location):
			loc = sc.sch.Location[len(parent.sch.Location):] + loc
		}
	}
	return loc
}

func escapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// frame is one schema evaluating one value (the validator's validator).
type frame struct {
	e          *evaluation
	v          any
	vloc       []step
	vid        int
	sch        *jsonschema.Schema
	keyword    string // the reference that led to sch, if any
	uneval     uneval
	errors     []*validationError
	boolResult bool
}

func (f *frame) validate() (uneval, *validationError) {
	e, s, v := f.e, f.sch, f.v
	e.budget.spend(2)
	if s.Bool != nil {
		if *s.Bool {
			return f.uneval, nil
		}
		return uneval{}, f.error(&kind.FalseSchema{})
	}
	if cycle := e.cycle(); cycle != nil {
		return uneval{}, f.error(cycle)
	}
	t := typeOf(v)
	if t == 0 {
		return uneval{}, f.error(&kind.InvalidJsonValue{Value: v})
	}
	if s.Types != nil && !s.Types.IsEmpty() {
		want := typesOf(s.Types)
		if want&t == 0 && (want&integerType == 0 || t != numberType || !decimalOf(string(v.(json.Number))).isInteger()) {
			return uneval{}, f.error(&kind.Type{Got: t.String(), Want: s.Types.ToStrings()})
		}
	}
	if s.Const != nil && !equal(e.budget, v, *s.Const) {
		return uneval{}, f.error(&kind.Const{Got: v, Want: *s.Const})
	}
	if s.Enum != nil && !e.s.enums[s].has(e.budget, v) {
		return uneval{}, f.error(&kind.Enum{Got: v, Want: s.Enum.Values})
	}
	if s.Format != nil {
		if err := e.format(s.Format, v); err != nil {
			return uneval{}, f.error(&kind.Format{Got: v, Want: s.Format.Name, Err: err})
		}
	}
	if s.Ref != nil {
		err := f.validateRef(s.Ref, "$ref")
		if s.DraftVersion < 2019 {
			return f.uneval, err
		}
		f.addErr(err)
	}
	switch v := v.(type) {
	case map[string]any:
		f.objValidate(v)
	case []any:
		f.arrValidate(v)
	case string:
		f.strValidate(v)
	case json.Number:
		f.numValidate(v)
	}
	if len(f.errors) == 0 || !f.boolResult {
		f.condValidate()
		if s.DraftVersion >= 2019 {
			f.unevalValidate()
		}
	}
	return f.result()
}

// result is what the frame's evaluation comes to: what is left
// unevaluated, or its one failure, or its failures grouped.
func (f *frame) result() (uneval, *validationError) {
	switch len(f.errors) {
	case 0:
		return f.uneval, nil
	case 1:
		return uneval{}, f.errors[0]
	}
	return uneval{}, f.group()
}

// group is the frame's failures as one, out of line so that result stays
// inlined.
//
//go:noinline
func (f *frame) group() *validationError {
	err := f.error(&kind.Group{})
	err.Causes = f.errors
	return err
}

// step is where a value is in the one holding it: a member's name, or an
// item's index, written as a location only in a failure.
type step struct {
	name string
	item int // -1 for a member
}

func member(name string) step { return step{name: name, item: -1} }
func index(i int) step        { return step{item: i} }

// location writes steps as the validator's InstanceLocation.
func location(steps []step) []string {
	loc := make([]string, len(steps))
	for i, s := range steps {
		loc[i] = s.name
		if s.item >= 0 {
			loc[i] = strconv.Itoa(s.item)
		}
	}
	return loc
}

// errorSteps are what a failure costs: made, then worded (collector.walk).
const errorSteps = 16

func (f *frame) error(k jsonschema.ErrorKind) *validationError {
	if f.boolResult {
		f.e.budget.spend(2)
		return &validationError{}
	}
	f.e.budget.spend(errorSteps + len(f.vloc)/4)
	return &validationError{SchemaURL: f.sch.Location, InstanceLocation: location(f.vloc), ErrorKind: k}
}

func (f *frame) addErr(err *validationError) {
	if err != nil {
		f.errors = append(f.errors, err)
	}
}

func (f *frame) addError(k jsonschema.ErrorKind) {
	f.errors = append(f.errors, f.error(k))
}

func (f *frame) addErrors(errors []*validationError, k jsonschema.ErrorKind) {
	err := f.error(k)
	err.Causes = errors
	f.errors = append(f.errors, err)
}

// validateSelf evaluates the frame's value against another schema, in
// place (allOf, $ref, if); keyword is the reference that leads there, if
// any.
func (f *frame) validateSelf(sch *jsonschema.Schema, keyword string, boolResult bool) *validationError {
	sub := frame{e: f.e, v: f.v, vloc: f.vloc, vid: f.vid, sch: sch, keyword: keyword, boolResult: f.boolResult || boolResult}
	sub.uneval = unevalFrom(f.e.budget, f.v, sch, !f.uneval.isEmpty())
	u, err := f.e.run(&sub)
	if err == nil {
		f.uneval.merge(f.e.budget, u)
	}
	return err
}

// validateVal evaluates a member or an item of the frame's value.
func (f *frame) validateVal(sch *jsonschema.Schema, v any, at step) *validationError {
	sub := frame{e: f.e, v: v, vloc: append(f.vloc, at), vid: f.vid + 1, sch: sch, boolResult: f.boolResult}
	sub.uneval = unevalFrom(f.e.budget, v, sch, false)
	_, err := f.e.run(&sub)
	return err
}

func (f *frame) validateRef(sch *jsonschema.Schema, keyword string) *validationError {
	err := f.validateSelf(sch, keyword, false)
	if err == nil {
		return nil
	}
	refErr := f.error(&kind.Reference{Keyword: keyword, URL: sch.Location})
	if _, ok := err.ErrorKind.(*kind.Group); ok {
		refErr.Causes = err.Causes
	} else {
		refErr.Causes = append(refErr.Causes, err)
	}
	return refErr
}
