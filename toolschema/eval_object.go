package toolschema

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// objValidate evaluates the keywords of an object, in the validator's
// order.
func (f *frame) objValidate(obj map[string]any) {
	s := f.sch
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
	if len(s.Dependencies) > 0 {
		f.dependenciesValidate(obj)
	}
	if stopped := f.membersValidate(obj); stopped {
		return
	}
	if s.DraftVersion == 4 {
		return
	}
	if s.PropertyNames != nil {
		f.namesValidate(obj)
	}
	if s.DraftVersion == 6 {
		return
	}
	if len(s.DependentSchemas) > 0 || len(s.DependentRequired) > 0 {
		f.dependentValidate(obj)
	}
}

// dependenciesValidate evaluates dependencies, the keyword of drafts
// before 2019-09: names or a schema required by a field present.
func (f *frame) dependenciesValidate(obj map[string]any) {
	for pname, dep := range f.sch.Dependencies {
		f.e.budget.spend(1)
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
}

// membersValidate evaluates each member against the schemas its name
// leads to: properties, patternProperties, else additionalProperties. It
// reports whether it stopped at a failure, a boolResult being enough.
func (f *frame) membersValidate(obj map[string]any) (stopped bool) {
	s, b := f.sch, f.e.budget
	patterns := f.e.s.patterns[s]
	// A member costs its map's iteration and lookups, besides its value.
	const memberSteps = 4
	var additionalPros []string
	for pname, pvalue := range obj {
		if f.boolResult && len(f.errors) > 0 {
			return true
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
	return false
}

// namesValidate evaluates each field name against propertyNames.
func (f *frame) namesValidate(obj map[string]any) {
	s := f.sch
	for pname := range obj {
		if err := f.e.validateName(s.PropertyNames, pname, f.boolResult); err != nil {
			err.InstanceLocation = location(f.vloc)
			err.SchemaURL = s.PropertyNames.Location
			err.ErrorKind = &kind.PropertyNames{Property: pname}
			f.addErr(err)
		}
	}
}

// dependentValidate evaluates dependentSchemas and dependentRequired: a
// schema, or names, required by a field present.
func (f *frame) dependentValidate(obj map[string]any) {
	s, b := f.sch, f.e.budget
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
