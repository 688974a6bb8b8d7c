package toolschema

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// arrValidate evaluates the keywords of an array, in the validator's
// order.
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
		f.tupleItemsValidate(arr)
	} else {
		f.prefixItemsValidate(arr)
	}
	if s.Contains != nil {
		f.containsValidate(arr)
	}
}

// tupleItemsValidate evaluates the items as drafts before 2020-12 do:
// items, one schema for all or one for each item it lists, then
// additionalItems for the items it does not.
func (f *frame) tupleItemsValidate(arr []any) {
	s := f.sch
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
}

// prefixItemsValidate evaluates the items as 2020-12 does: prefixItems,
// one schema for each item it lists, then items for the others.
func (f *frame) prefixItemsValidate(arr []any) {
	s := f.sch
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

// containsValidate evaluates contains, with minContains and maxContains.
func (f *frame) containsValidate(arr []any) {
	s := f.sch
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
