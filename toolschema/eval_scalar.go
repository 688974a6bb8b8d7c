package toolschema

import (
	"encoding/json"
	"math/big"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

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
