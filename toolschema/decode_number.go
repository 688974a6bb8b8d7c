package toolschema

import (
	"encoding/json"
	"strconv"
)

// number reads a number in JSON's grammar.
func (d *decoder) number() (any, error) {
	text, err := d.numberText()
	if err != nil {
		return nil, err
	}
	if len(text) == 1 {
		return digits[text[0]-'0'], nil
	}
	// Its text and its place in an interface are two allocations, and more
	// bytes to read again: a number of many digits is more than a value.
	d.budget.spendBytes(len(text), 8)
	return json.Number(text), nil
}

// digits are the numbers of one digit, made once: arrays of small numbers
// are common, and each number made would cost an allocation.
var digits = func() (numbers [10]any) {
	for i := range numbers {
		numbers[i] = json.Number(strconv.Itoa(i))
	}
	return numbers
}()

// numberText reads a number in JSON's grammar, and returns its text.
func (d *decoder) numberText() ([]byte, error) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, d.fail("invalid number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	exponent := 0
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		from := d.i
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
		for _, c := range d.b[from:d.i] {
			exponent = min(10*exponent+int(c-'0'), maxExponent+1)
		}
	}
	text := d.b[start:d.i]
	if len(text) > maxNumber || exponent > maxExponent {
		return nil, ErrNumberRange
	}
	if exponent+maxNumber < 300 {
		// Written in maxNumber characters, with an exponent that small, a
		// number is 0 or between 1e-300 and 1e300: a float64 holds it.
		return text, nil
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil || (f == 0 && !isZero(text)) {
		return nil, ErrNumberRange // too large, or too small but not 0
	}
	return text, nil
}

// isZero reports whether a number's text writes 0: no digit but 0 before
// its exponent.
func isZero(text []byte) bool {
	for _, c := range text {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}
