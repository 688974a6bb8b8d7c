package toolschema

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/cputime"
)

// What a check costs follows the bytes of the arguments, whatever the
// schema: at most callCPU of CPU per call (the budget's steps, MaxSteps at
// most, are a few tens of nanoseconds each), after which the call passes
// unchecked. Run the benchmarks of the same calls with
//
//	go test -run '^$' -bench Hostile -benchmem ./toolschema/

// callCPU bounds what one check may cost.
const callCPU = 100 * time.Millisecond * raceSlowdown

// hostile is a call that cost the gateway far more than its bytes: a
// schema an upstream may list, and arguments a client may send.
type hostile struct {
	name, schema, args string
	// refused: the schema does not compile (its calls pass unchecked);
	// overBudget: the check stops; else problems are the problems found.
	refused, overBudget bool
	problems            []envelope.FieldProblem
}

func callOf(args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":` + args + `}}`)
}

// jsonArray writes a JSON array of n items.
func jsonArray(n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(i))
	}
	b.WriteByte(']')
	return b.String()
}

// members writes a JSON object of n members.
func members(n int, member func(i int) string) string {
	return "{" + strings.Trim(jsonArray(n, member), "[]") + "}"
}

// ratings is a schema as servers write them: an array of integers from 1
// to 5.
const ratings = `{"type":"object","properties":{"ratings":{"type":"array","items":{"type":"integer","enum":[1,2,3,4,5]}}},"required":["ratings"]}`

func ratingsArgs(n int, at int, bad string) string {
	return `{"ratings":` + jsonArray(n, func(i int) string {
		if i == at {
			return bad
		}
		return strconv.Itoa(1 + i%5)
	}) + `}`
}

// fanningSchema refers twice to the level below, levels times over.
func fanningSchema(keyword string, levels int, leaf string) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"d0":` + leaf)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, `,"d%d":{"%s":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, keyword, i-1, i-1)
	}
	fmt.Fprintf(&b, `},"$ref":"#/$defs/d%d"}`, levels)
	return b.String()
}

// patternsSchema is a patternProperties of 2,018 patterns, each ^x and 4
// digits (anchored) or x and 4 digits (found anywhere in a name).
func patternsSchema(anchored bool) string {
	return `{"type":"object","patternProperties":` + members(2018, func(i int) string {
		if anchored {
			return fmt.Sprintf(`"^x%04d$":{"type":"integer"}`, i)
		}
		return fmt.Sprintf(`"x%04d":{"type":"integer"}`, i)
	}) + `}`
}

func hostileCalls() []hostile {
	notAllowed := func(path, sent string) envelope.FieldProblem {
		return envelope.FieldProblem{Path: path, Problem: "Not an allowed value", Sent: []byte(sent),
			Expected: "Expected one of: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, and 11980 more."}
	}
	twentyThousandKeys := members(20000, func(i int) string { return fmt.Sprintf(`"k%05d":0`, i) })
	var costlyRegexes []hostile
	for _, distinct := range []bool{false, true} {
		name := "format regex: 2,000 times [\\p{L}]{999}, parsed once"
		if distinct {
			name = "format regex: 2,000 distinct [\\p{L}]{999}"
		}
		costlyRegexes = append(costlyRegexes, hostile{
			name:   name,
			schema: `{"type":"object","properties":{"patterns":{"type":"array","items":{"type":"string","format":"regex"}}}}`,
			args: `{"patterns":` + jsonArray(2000, func(i int) string {
				if distinct {
					return fmt.Sprintf(`"[\\p{L}]{999}%d"`, i)
				}
				return `"[\\p{L}]{999}"`
			}) + `}`,
			overBudget: distinct,
		})
	}
	return append(costlyRegexes, []hostile{
		{
			name:   "an array of integer items with enum [1..5]: 80,000 numbers",
			schema: ratings, args: ratingsArgs(80000, -1, ""),
		},
		{
			name:   "the same, one of them not allowed",
			schema: ratings, args: ratingsArgs(80000, 41234, "6"),
			problems: []envelope.FieldProblem{{Path: "ratings.41234", Problem: "Not an allowed value", Sent: []byte("6"), Expected: "Expected one of: 1, 2, 3, 4, 5."}},
		},
		{
			name:   "the same, 4 MiB of numbers",
			schema: ratings, args: ratingsArgs(2<<20, -1, ""),
			overBudget: true,
		},
		{
			name:   "the same, 4 MiB of numbers of 20 characters",
			schema: ratings, args: `{"ratings":` + jsonArray(4<<20/21, func(i int) string { return strconv.Itoa(1+i%5) + ".000000000000000000" }) + `}`,
			overBudget: true,
		},
		{
			name:   "12,000-value numeric enum: 100 numbers",
			schema: `{"type":"object","properties":{"n":{"type":"array","items":{"enum":` + jsonArray(12000, strconv.Itoa) + `}}}}`,
			args:   `{"n":` + jsonArray(100, func(int) string { return "-1" }) + `}`,
			problems: []envelope.FieldProblem{
				notAllowed("n.0", "-1"), notAllowed("n.1", "-1"), notAllowed("n.10", "-1"), notAllowed("n.11", "-1"), notAllowed("n.12", "-1"),
				notAllowed("n.13", "-1"), notAllowed("n.14", "-1"), notAllowed("n.15", "-1"), notAllowed("n.16", "-1"), notAllowed("n.17", "-1"),
			},
		},
		{
			name:   "2,018 patternProperties anchored by a literal: 20,000 names",
			schema: patternsSchema(true), args: twentyThousandKeys,
		},
		{
			name:   "2,018 patternProperties found anywhere in a name: 20,000 names",
			schema: patternsSchema(false), args: twentyThousandKeys,
			overBudget: true,
		},
		{
			name:   "allOf of $ref, 18 levels",
			schema: fanningSchema("allOf", 18, `{"type":"object"}`), args: `{}`,
			refused: true,
		},
		{
			name:   "anyOf fan-out, 16 levels",
			schema: fanningSchema("anyOf", 16, `{"type":"string"}`), args: `{}`,
			refused: true,
		},
		{
			name:       "allOf whose branches each descend to the root again, 40 levels of arguments",
			schema:     `{"allOf":[{"properties":{"a":{"$ref":"#"}}},{"properties":{"a":{"$ref":"#"}}}]}`,
			args:       strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40),
			overBudget: true,
		},
		{
			name:       "a pattern of a thousand classes on 200 KB of text",
			schema:     `{"type":"object","properties":{"p":{"type":"string","pattern":"[\\p{L}]{999}x"}}}`,
			args:       `{"p":"` + strings.Repeat("é", 100000) + `"}`,
			overBudget: true,
		},
		{
			name:       "arguments nested 1,000 deep",
			schema:     `{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"}}},"type":"object","properties":{"p":{"$ref":"#/$defs/n"}}}`,
			args:       `{"p":` + strings.Repeat("[", 990) + strings.Repeat("]", 990) + `}`,
			overBudget: true,
		},
		{
			name:       "numbers of 300 digits against a multipleOf",
			schema:     `{"type":"object","properties":{"p":{"type":"array","items":{"type":"number","multipleOf":0.7}}}}`,
			args:       `{"p":` + jsonArray(20000, func(int) string { return "1.2345678912345678912345678912345e-300" }) + `}`,
			overBudget: true,
		},
		{
			name:       "a string of 4 MiB breaking three keywords",
			schema:     `{"type":"object","properties":{"s":{"maxLength":10,"not":{"type":"string"},"anyOf":[{"maxLength":1},{"maxLength":2}]}}}`,
			args:       `{"s":"` + strings.Repeat("a", 4<<20) + `"}`,
			overBudget: true,
		},
		{
			name:       "20,000 names against propertyNames",
			schema:     `{"type":"object","propertyNames":{"pattern":"^[a-z]+$","maxLength":4}}`,
			args:       twentyThousandKeys,
			overBudget: true,
		},
	}...)
}

func TestHostileCallsCostLittleCPU(t *testing.T) {
	for _, call := range hostileCalls() {
		t.Run(call.name, func(t *testing.T) {
			var s *Schema
			var err error
			spent := cputime.Of(func() { s, err = Compile([]byte(call.schema)) })
			if call.refused {
				assert.ErrorContains(t, err, "combinators evaluate one value against over 1000 schemas")
				assert.Less(t, spent, callCPU, "CPU time to compile")
				return
			}
			require.NoError(t, err)
			body := callOf(call.args)
			var problems []envelope.FieldProblem
			spent = cputime.Of(func() { problems, err = s.CheckCall(t.Context(), body) })
			t.Logf("CPU time %v", spent)
			assert.Less(t, spent, callCPU, "CPU time")
			if call.overBudget {
				assert.ErrorIs(t, err, ErrOverBudget)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, call.problems, problems)
		})
	}
}

// The budget follows the bytes of the arguments: a small call that would
// cost much stops early.
func TestTheBudgetFollowsTheBytes(t *testing.T) {
	s, err := Compile([]byte(`{"allOf":[{"properties":{"a":{"$ref":"#"}}},{"properties":{"a":{"$ref":"#"}}}]}`))
	require.NoError(t, err)
	args := []byte(strings.Repeat(`{"a":`, 20) + "1" + strings.Repeat("}", 20))
	b := budgetFor(t.Context(), len(args))
	assert.Equal(t, MinSteps+StepsPerByte*len(args), b.left)
	problems, err := s.Check(t.Context(), args)
	assert.ErrorIs(t, err, ErrOverBudget, "2^20 evaluations")
	assert.Nil(t, problems)

	assert.Equal(t, MaxSteps, budgetFor(t.Context(), 4<<20).left, "whatever the size")
}

// leavingContext is a request whose client leaves once the check has
// polled its context polls times.
type leavingContext struct {
	context.Context
	polls atomic.Int64
}

func (c *leavingContext) Err() error {
	if c.polls.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// A check stops when its client leaves: the context is polled every
// pollSteps steps.
func TestACheckStopsWhenItsClientLeaves(t *testing.T) {
	s, err := Compile([]byte(patternsSchema(false)))
	require.NoError(t, err)
	body := callOf(members(20000, func(i int) string { return fmt.Sprintf(`"k%05d":0`, i) }))
	for _, polls := range []int64{0, 1, 10} {
		ctx := &leavingContext{Context: t.Context()}
		ctx.polls.Store(polls)
		var problems []envelope.FieldProblem
		spent := cputime.Of(func() { problems, err = s.CheckCall(ctx, body) })
		t.Logf("CPU time %v, the client leaving after %d polls", spent, polls)
		assert.ErrorIs(t, err, context.Canceled, "after %d polls", polls)
		assert.Nil(t, problems)
		assert.Less(t, spent, 10*time.Millisecond*raceSlowdown, "CPU time, the client leaving after %d polls", polls)
	}
}

// The names nearest an unknown tool are found at a cost bounded by their
// lengths and number, nearest first.
func TestNearestNamesCostLittleCPU(t *testing.T) {
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("%05d", i) + strings.Repeat("n", 245)
	}
	var near []string
	spent := cputime.Of(func() { near = Nearest(strings.Repeat("q", 128), names, 5) })
	t.Logf("CPU time %v", spent)
	assert.Less(t, spent, callCPU, "CPU time")
	assert.Len(t, near, 5)

	names = append(names, "get_invoice", "list_invoices", "search")
	spent = cputime.Of(func() { near = Nearest("get_invoce", names, 3) })
	assert.Less(t, spent, callCPU, "CPU time")
	assert.Equal(t, []string{"get_invoice", "list_invoices", "search"}, near)
}

func BenchmarkHostileCheck(b *testing.B) {
	for _, call := range hostileCalls() {
		b.Run(call.name, func(b *testing.B) {
			if call.refused {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Compile([]byte(call.schema)); err == nil {
						b.Fatal("compiled")
					}
				}
				return
			}
			s, err := Compile([]byte(call.schema))
			require.NoError(b, err)
			body := callOf(call.args)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.CheckCall(b.Context(), body); (err != nil) != call.overBudget {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkHostileNearest(b *testing.B) {
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("%05d", i) + strings.Repeat("n", 245)
	}
	name := strings.Repeat("q", 128)
	b.ReportAllocs()
	for b.Loop() {
		Nearest(name, names, 5)
	}
}

// Reading a text costs each of its values two steps, and a text holds more
// values than commas outside its strings: a call whose values alone would
// take more than its budget to read stops before any is read, taking no
// memory for them.
func TestACallTooLargeToReadStopsBeforeItIsRead(t *testing.T) {
	texts := append([]string{
		`{"a":[1,2,{"b":"x,y\",z"}],"c":"\\","d":[[],{}]}`,
		string(callOf(`{"a":[1,2,3],"b":"x,y"}`)),
	}, decodeCorpus...)
	for _, text := range texts {
		b := &budget{ctx: t.Context(), left: MaxSteps, poll: pollSteps}
		_, err := guarded(func() []envelope.FieldProblem {
			_, _ = decodeOn(b, []byte(text))
			_, _ = decodeArguments(b, []byte(text), true)
			return nil
		})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, MaxSteps-b.left, 2*valueSteps*separators([]byte(text)), "%s", text)
	}

	s, err := Compile([]byte(ratings))
	require.NoError(t, err)
	body := callOf(ratingsArgs(2<<20, -1, ""))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	problems, err := s.CheckCall(t.Context(), body)
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, ErrOverBudget)
	assert.Nil(t, problems)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "bytes allocated")
}
