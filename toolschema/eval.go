package toolschema

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

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
	switch len(f.errors) {
	case 0:
		return f.uneval, nil
	case 1:
		return uneval{}, f.errors[0]
	}
	err := f.error(&kind.Group{})
	err.Causes = f.errors
	return uneval{}, err
}

// format checks a format, at a step for each formatBytesPerStep bytes of a
// string (the validator's formats read a string once, or a few times).
func (e *evaluation) format(fm *jsonschema.Format, v any) error {
	s, isString := v.(string)
	if fm.Name == "regex" {
		if !isString {
			return nil
		}
		return e.regexFormat(s)
	}
	e.budget.spendBytes(len(s), formatBytesPerStep)
	return fm.Validate(v)
}

const formatBytesPerStep = 4

func (f *frame) objValidate(obj map[string]any) {
	s, b := f.sch, f.e.budget
	if s.MinProperties != nil && len(obj) < *s.MinProperties {
		f.addError(&kind.MinProperties{Got: len(obj), Want: *s.MinProperties})
	}
	if s.MaxProperties != nil && len(obj) > *s.MaxProperties {
		f.addError(&kind.MaxProperties{Got: len(obj), Want: *s.MaxProperties})
	}
	if len(s.Required) > 0 {
		if missing := f.findMissing(obj, s.Required); missing != nil {
			f.addError(&kind.Required{Missing: missing})
		}
	}
	if f.boolResult && len(f.errors) > 0 {
		return
	}
	for pname, dep := range s.Dependencies {
		b.spend(1)
		if _, ok := obj[pname]; ok {
			switch dep := dep.(type) {
			case []string:
				if missing := f.findMissing(obj, dep); missing != nil {
					f.addError(&kind.Dependency{Prop: pname, Missing: missing})
				}
			case *jsonschema.Schema:
				f.addErr(f.validateSelf(dep, "", false))
			}
		}
	}
	patterns := f.e.s.patterns[s]
	// A member costs its map's iteration and lookups, besides its value.
	const memberSteps = 4
	var additionalPros []string
	for pname, pvalue := range obj {
		if f.boolResult && len(f.errors) > 0 {
			return
		}
		b.spend(memberSteps + len(pname)/64)
		evaluated := false
		if sch, ok := s.Properties[pname]; ok {
			evaluated = true
			f.addErr(f.validateVal(sch, pvalue, member(pname)))
		}
		if patterns != nil {
			var arr [4]*jsonschema.Schema
			for _, sch := range patterns.appendMatching(b, arr[:0], pname) {
				evaluated = true
				f.addErr(f.validateVal(sch, pvalue, member(pname)))
			}
		}
		if !evaluated && s.AdditionalProperties != nil {
			evaluated = true
			switch additional := s.AdditionalProperties.(type) {
			case bool:
				if !additional {
					additionalPros = append(additionalPros, pname)
				}
			case *jsonschema.Schema:
				f.addErr(f.validateVal(additional, pvalue, member(pname)))
			}
		}
		if evaluated {
			delete(f.uneval.props, pname)
		}
	}
	if len(additionalPros) > 0 {
		f.addError(&kind.AdditionalProperties{Properties: additionalPros})
	}
	if s.DraftVersion == 4 {
		return
	}
	if s.PropertyNames != nil {
		for pname := range obj {
			if err := f.e.validateName(s.PropertyNames, pname, f.boolResult); err != nil {
				err.InstanceLocation = location(f.vloc)
				err.SchemaURL = s.PropertyNames.Location
				err.ErrorKind = &kind.PropertyNames{Property: pname}
				f.addErr(err)
			}
		}
	}
	if s.DraftVersion == 6 {
		return
	}
	for pname, sch := range s.DependentSchemas {
		b.spend(1)
		if _, ok := obj[pname]; ok {
			f.addErr(f.validateSelf(sch, "", false))
		}
	}
	for pname, reqd := range s.DependentRequired {
		b.spend(1)
		if _, ok := obj[pname]; ok {
			if missing := f.findMissing(obj, reqd); missing != nil {
				f.addError(&kind.DependentRequired{Prop: pname, Missing: missing})
			}
		}
	}
}

// validateName evaluates a field name on its own, as the root of a check
// of its own (propertyNames).
func (e *evaluation) validateName(sch *jsonschema.Schema, name string, boolResult bool) *validationError {
	e.budget.spend(4)
	floor := e.floor
	e.floor = len(e.scopes)
	err := e.validate(sch, name, boolResult)
	e.floor = floor
	return err
}

func (f *frame) arrValidate(arr []any) {
	s := f.sch
	if s.MinItems != nil && len(arr) < *s.MinItems {
		f.addError(&kind.MinItems{Got: len(arr), Want: *s.MinItems})
	}
	if s.MaxItems != nil && len(arr) > *s.MaxItems {
		f.addError(&kind.MaxItems{Got: len(arr), Want: *s.MaxItems})
	}
	if s.UniqueItems && len(arr) > 1 {
		if i, j := duplicates(f.e.budget, arr); i != -1 {
			f.addError(&kind.UniqueItems{Duplicates: [2]int{i, j}})
		}
	}
	if s.DraftVersion < 2020 {
		evaluated := 0
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			for i, item := range arr {
				f.addErr(f.validateVal(items, item, index(i)))
			}
			evaluated = len(arr)
		case []*jsonschema.Schema:
			evaluated = min(len(arr), len(items))
			for i, item := range arr[:evaluated] {
				f.addErr(f.validateVal(items[i], item, index(i)))
			}
		}
		switch additional := s.AdditionalItems.(type) {
		case bool:
			if !additional && evaluated != len(arr) {
				f.addError(&kind.AdditionalItems{Count: len(arr) - evaluated})
			}
		case *jsonschema.Schema:
			for i, item := range arr[evaluated:] {
				f.addErr(f.validateVal(additional, item, index(evaluated+i)))
			}
		}
	} else {
		evaluated := min(len(s.PrefixItems), len(arr))
		for i, item := range arr[:evaluated] {
			f.addErr(f.validateVal(s.PrefixItems[i], item, index(i)))
		}
		if s.Items2020 != nil {
			for i, item := range arr[evaluated:] {
				f.addErr(f.validateVal(s.Items2020, item, index(evaluated+i)))
			}
		}
	}
	if s.Contains != nil {
		var errors []*validationError
		var matched []int
		for i, item := range arr {
			if err := f.validateVal(s.Contains, item, index(i)); err != nil {
				errors = append(errors, err)
			} else {
				matched = append(matched, i)
				if s.DraftVersion >= 2020 {
					delete(f.uneval.items, i)
				}
			}
		}
		if s.MinContains != nil {
			if len(matched) < *s.MinContains {
				f.addErrors(errors, &kind.MinContains{Got: matched, Want: *s.MinContains})
			}
		} else if len(matched) == 0 {
			f.addErrors(errors, &kind.Contains{})
		}
		if s.MaxContains != nil && len(matched) > *s.MaxContains {
			f.addError(&kind.MaxContains{Got: matched, Want: *s.MaxContains})
		}
	}
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

// The content keywords (contentEncoding, contentMediaType, contentSchema)
// are annotations only: Compile does not ask the validator to assert them.
func (f *frame) strValidate(str string) {
	s, b := f.sch, f.e.budget
	if s.MinLength != nil || s.MaxLength != nil {
		b.spendBytes(len(str), 64)
		n := utf8.RuneCountInString(str)
		if s.MinLength != nil && n < *s.MinLength {
			f.addError(&kind.MinLength{Got: n, Want: *s.MinLength})
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			f.addError(&kind.MaxLength{Got: n, Want: *s.MaxLength})
		}
	}
	if s.Pattern != nil && !s.Pattern.(*pattern).match(b, str) {
		f.addError(&kind.Pattern{Got: str, Want: s.Pattern.String()})
	}
}

func (f *frame) numValidate(n json.Number) {
	s := f.sch
	if s.Minimum == nil && s.Maximum == nil && s.ExclusiveMinimum == nil && s.ExclusiveMaximum == nil && s.MultipleOf == nil {
		return
	}
	// A big.Rat of a number of up to 64 digits and an exponent up to
	// maxExponent (decode bounds both).
	d := decimalOf(string(n))
	f.e.budget.spend(numberSteps + len(d.digits) + abs(d.exp))
	num := d.rat()
	if s.Minimum != nil && num.Cmp(s.Minimum) < 0 {
		f.addError(&kind.Minimum{Got: num, Want: s.Minimum})
	}
	if s.Maximum != nil && num.Cmp(s.Maximum) > 0 {
		f.addError(&kind.Maximum{Got: num, Want: s.Maximum})
	}
	if s.ExclusiveMinimum != nil && num.Cmp(s.ExclusiveMinimum) <= 0 {
		f.addError(&kind.ExclusiveMinimum{Got: num, Want: s.ExclusiveMinimum})
	}
	if s.ExclusiveMaximum != nil && num.Cmp(s.ExclusiveMaximum) >= 0 {
		f.addError(&kind.ExclusiveMaximum{Got: num, Want: s.ExclusiveMaximum})
	}
	if s.MultipleOf != nil {
		if q := new(big.Rat).Quo(num, s.MultipleOf); !q.IsInt() {
			f.addError(&kind.MultipleOf{Got: num, Want: s.MultipleOf})
		}
	}
}

const numberSteps = 8

func abs(n int) int { return max(n, -n) }

func (f *frame) condValidate() {
	s := f.sch
	if s.Not != nil && f.validateSelf(s.Not, "", true) == nil {
		f.addError(&kind.Not{})
	}
	if len(s.AllOf) > 0 {
		var errors []*validationError
		for _, sch := range s.AllOf {
			if err := f.validateSelf(sch, "", false); err != nil {
				errors = append(errors, err)
				if f.boolResult {
					break
				}
			}
		}
		if len(errors) != 0 {
			f.addErrors(errors, &kind.AllOf{})
		}
	}
	if len(s.AnyOf) > 0 {
		matched := false
		var errors []*validationError
		for _, sch := range s.AnyOf {
			if err := f.validateSelf(sch, "", false); err != nil {
				errors = append(errors, err)
			} else {
				matched = true
				// Every branch counts for what is left unevaluated.
				if f.uneval.isEmpty() {
					break
				}
			}
		}
		if !matched {
			f.addErrors(errors, &kind.AnyOf{})
		}
	}
	if len(s.OneOf) > 0 {
		matched := -1
		var errors []*validationError
		for i, sch := range s.OneOf {
			if err := f.validateSelf(sch, "", matched != -1); err != nil {
				if matched == -1 {
					errors = append(errors, err)
				}
			} else if matched == -1 {
				matched = i
			} else {
				f.addError(&kind.OneOf{Subschemas: []int{matched, i}})
				break
			}
		}
		if matched == -1 {
			f.addErrors(errors, &kind.OneOf{Subschemas: nil})
		}
	}
	if s.If != nil {
		if f.validateSelf(s.If, "", true) == nil {
			if s.Then != nil {
				f.addErr(f.validateSelf(s.Then, "", false))
			}
		} else if s.Else != nil {
			f.addErr(f.validateSelf(s.Else, "", false))
		}
	}
}

func (f *frame) unevalValidate() {
	s := f.sch
	if obj, ok := f.v.(map[string]any); ok && s.UnevaluatedProperties != nil {
		for pname := range f.uneval.props {
			if pvalue, ok := obj[pname]; ok {
				f.addErr(f.validateVal(s.UnevaluatedProperties, pvalue, member(pname)))
			}
		}
		f.uneval.props = nil
	}
	if arr, ok := f.v.([]any); ok && s.UnevaluatedItems != nil {
		for i := range f.uneval.items {
			f.addErr(f.validateVal(s.UnevaluatedItems, arr[i], index(i)))
		}
		f.uneval.items = nil
	}
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

func (f *frame) findMissing(obj map[string]any, required []string) []string {
	f.e.budget.spend(1 + len(required)/8)
	var missing []string
	for _, pname := range required {
		if _, ok := obj[pname]; !ok {
			if f.boolResult {
				return []string{} // not nil: something is missing
			}
			missing = append(missing, pname)
		}
	}
	return missing
}

// uneval are the members and items of a value that no keyword evaluated
// yet, when a schema asks (unevaluatedProperties, unevaluatedItems).
type uneval struct {
	props map[string]struct{}
	items map[int]struct{}
}

func unevalFrom(b *budget, v any, sch *jsonschema.Schema, callerNeeds bool) uneval {
	switch v := v.(type) {
	case map[string]any:
		// additionalProperties evaluates every member the schema's other
		// keywords leave.
		if sch.AdditionalProperties == nil && (callerNeeds || sch.UnevaluatedProperties != nil) {
			b.spend(2 * len(v))
			props := make(map[string]struct{}, len(v))
			for k := range v {
				props[k] = struct{}{}
			}
			return uneval{props: props}
		}
	case []any:
		all, from := itemsEvaluated(sch)
		if !all && (callerNeeds || sch.UnevaluatedItems != nil) && from < len(v) {
			b.spend(2 * (len(v) - from))
			items := make(map[int]struct{}, len(v)-from)
			for i := from; i < len(v); i++ {
				items[i] = struct{}{}
			}
			return uneval{items: items}
		}
	}
	return uneval{}
}

// itemsEvaluated says whether sch's own keywords evaluate every item of an
// array, or else from which index on they evaluate none.
func itemsEvaluated(sch *jsonschema.Schema) (all bool, from int) {
	if sch.DraftVersion < 2020 {
		switch items := sch.Items.(type) {
		case *jsonschema.Schema:
			return true, 0
		case []*jsonschema.Schema:
			return sch.AdditionalItems != nil, len(items)
		}
		return sch.AdditionalItems != nil, 0
	}
	return sch.Items2020 != nil, len(sch.PrefixItems)
}

// merge keeps unevaluated only what other left unevaluated too.
func (u uneval) merge(b *budget, other uneval) {
	b.spend(len(u.props) + len(u.items))
	for k := range u.props {
		if _, ok := other.props[k]; !ok {
			delete(u.props, k)
		}
	}
	for i := range u.items {
		if _, ok := other.items[i]; !ok {
			delete(u.items, i)
		}
	}
}

func (u uneval) isEmpty() bool { return len(u.props) == 0 && len(u.items) == 0 }
