package toolschema

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// condValidate evaluates the schemas the value must match in place, or
// must not: not, allOf, anyOf, oneOf, and if with then or else.
func (f *frame) condValidate() {
	s := f.sch
	if s.Not != nil && f.validateSelf(s.Not, "", true) == nil {
		f.addError(&kind.Not{})
	}
	if len(s.AllOf) > 0 {
		f.allOfValidate()
	}
	if len(s.AnyOf) > 0 {
		f.anyOfValidate()
	}
	if len(s.OneOf) > 0 {
		f.oneOfValidate()
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

func (f *frame) allOfValidate() {
	var errors []*validationError
	for _, sch := range f.sch.AllOf {
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

func (f *frame) anyOfValidate() {
	matched := false
	var errors []*validationError
	for _, sch := range f.sch.AnyOf {
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

func (f *frame) oneOfValidate() {
	matched := -1
	var errors []*validationError
	for i, sch := range f.sch.OneOf {
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

// unevalValidate evaluates unevaluatedProperties and unevaluatedItems on
// the members and items no other keyword evaluated.
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
