package toolschema

import (
	"context"
	"errors"
)

// What a check may cost. Every check runs on a budget of steps, a step
// being a few tens of nanoseconds of work at most: reading a value of the
// arguments, evaluating one schema on one value, a few bytes hashed,
// compared or matched. The budget follows the bytes of the arguments
// (MinSteps, then StepsPerByte for each byte), up to MaxSteps whatever
// their size: past it the check stops, and the call passes unchecked
// (ErrOverBudget), as one whose tool the gateway does not know. The
// request's context is polled every pollSteps steps: a check whose client
// left stops there.
const (
	MinSteps     = 16 << 10
	StepsPerByte = 8
	MaxSteps     = 1 << 19
	pollSteps    = 1 << 10
)

// ErrOverBudget is a check that would cost more than its budget.
var ErrOverBudget = errors.New("checking the arguments would cost more than their budget")

// budget is what is left of one check's steps.
type budget struct {
	ctx  context.Context
	left int
	// poll is the steps left before the context is polled again.
	poll int
}

// budgetFor is the budget of a check of n bytes of arguments.
func budgetFor(ctx context.Context, n int) *budget {
	return &budget{ctx: ctx, left: min(MaxSteps, MinSteps+StepsPerByte*n), poll: pollSteps}
}

// stopped is what a check panics with when it stops before its end: its
// budget is spent, or its context is done. check and passes recover it.
type stopped struct{ err error }

// spend takes n steps from the budget, and stops the check (panics with
// stopped) when fewer than none are left, or when the context is done. A
// nil budget is no budget: what the schema's own size bounds (compiling
// it) spends nothing.
func (b *budget) spend(n int) {
	if b == nil {
		return
	}
	b.left -= n
	b.poll -= n
	if b.left < 0 {
		panic(stopped{ErrOverBudget})
	}
	if b.poll < 0 {
		b.poll = pollSteps
		if err := b.ctx.Err(); err != nil {
			panic(stopped{err})
		}
	}
}

// spendBytes takes the steps of scanning n bytes once, at perStep bytes a
// step, and one step more.
func (b *budget) spendBytes(n, perStep int) { b.spend(1 + n/perStep) }

// valueSteps are what reading a value costs (decoder.step).
const valueSteps = 2

// affordsReading stops the check at once (panics with stopped) when
// reading the JSON text body alone would cost more than the budget left:
// each value costs valueSteps, and a text holds more values than commas
// outside its strings. A call of megabytes of small values stops before any
// is read, rather than after hundreds of thousands were, at a cost the
// budget did not see (the memory they took). Counting costs a step for each
// 64 bytes.
func (b *budget) affordsReading(body []byte) {
	b.spendBytes(len(body), 64)
	if b != nil && valueSteps*separators(body) > b.left {
		panic(stopped{ErrOverBudget})
	}
}

// separators counts the commas of a JSON text outside its strings.
func separators(text []byte) int {
	n := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case ',':
			n++
		case '"':
			for i++; i < len(text) && text[i] != '"'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		}
	}
	return n
}
