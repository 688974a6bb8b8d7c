package toolschema

import (
	"fmt"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"slices"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Regular expressions cost a check in three places, each bounded here:
//
//   - A schema's pattern and patternProperties are compiled once, with the
//     schema, and refused over maxPattern bytes (maxPatterns for all of a
//     schema's) or maxPatternInsts instructions. Go's regexp matches in
//     linear time, but that time is the text's length times the program's
//     size, each instruction that matches a class of characters weighing
//     as much as searching it (\p{L} is some 650 ranges): a match takes a
//     step for each byte and each patternWeightPerStep of that weight.
//   - A patternProperties of thousands of patterns is not tried pattern by
//     pattern on every field name: those that start with ^ and a literal
//     are found by that literal (patternIndex).
//   - The "regex" format compiles a string of the call: parsing it (what
//     decides whether it compiles; the rest of compiling never fails)
//     costs up to 15 µs a byte (each \p{L} expands to hundreds of
//     ranges), so it takes regexParseSteps a byte, once per distinct
//     string in a check, and a string over maxRegexFormat bytes stops the
//     check (ErrOverBudget).
const (
	maxPattern           = 4 << 10
	maxPatterns          = 16 << 10
	maxPatternInsts      = 4 << 10
	patternWeightPerStep = 16
	maxRegexFormat       = 1 << 10
	regexParseSteps      = 256
	maxRegexVerdicts     = 256
)

// pattern is a schema's regular expression, compiled once.
type pattern struct {
	*regexp.Regexp
	// weight is the size of its program, classes weighing more.
	weight int
	// prefix is a literal that the text of every match starts with, when
	// the expression starts with ^ and a literal; "" otherwise.
	prefix string
}

// patternCompiler is the validator's regexp engine for one schema
// (Compiler.UseRegexpEngine): Go's regexp, as the validator's own, with
// bounds.
type patternCompiler struct {
	// compiled are the patterns compiled, each once (the validator also
	// compiles a schema's patterns to check the schema against its
	// draft's); total is their size.
	compiled map[string]*pattern
	total    int
}

func (pc *patternCompiler) compile(expr string) (jsonschema.Regexp, error) {
	if p, found := pc.compiled[expr]; found {
		return p, nil
	}
	pc.total += len(expr)
	switch {
	case len(expr) > maxPattern:
		return nil, fmt.Errorf("a pattern of %d bytes, over the %d compiled", len(expr), maxPattern)
	case pc.total > maxPatterns:
		return nil, fmt.Errorf("patterns of over %d bytes in all", maxPatterns)
	}
	parsed, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	if n := progSize(parsed); n > maxPatternInsts {
		return nil, fmt.Errorf("pattern %q of over %d instructions", clipText(expr), maxPatternInsts)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	weight := 0
	for _, inst := range prog.Inst {
		weight += 1 + bits.Len(uint(len(inst.Rune)))
	}
	p := &pattern{Regexp: re, weight: weight, prefix: anchoredPrefix(parsed)}
	if pc.compiled == nil {
		pc.compiled = make(map[string]*pattern)
	}
	pc.compiled[expr] = p
	return p, nil
}

// progSize is about how many instructions re compiles to (repetitions
// written out, as Simplify writes them), at most maxPatternInsts+1: known
// before compiling, which costs as much.
func progSize(re *syntax.Regexp) int {
	const over = maxPatternInsts + 1
	subs := 0
	for _, sub := range re.Sub {
		subs = min(over, subs+progSize(sub))
	}
	switch re.Op {
	case syntax.OpLiteral:
		return min(over, len(re.Rune)+1)
	case syntax.OpRepeat:
		n := max(re.Min, re.Max)
		if n > 0 && subs > over/n {
			return over
		}
		return min(over, (n+1)*(subs+1))
	}
	return min(over, subs+len(re.Sub)+2)
}

// anchoredPrefix is the literal re starts with after ^ (at the start of the
// text), "" when it starts otherwise or the literal ignores case.
func anchoredPrefix(re *syntax.Regexp) string {
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return ""
	}
	lit := re.Sub[1]
	if lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 || slices.Contains(lit.Rune, utf8.RuneError) {
		return "" // U+FFFD also matches a byte that is not UTF-8
	}
	return string(lit.Rune)
}

// match reports whether p matches s, taking its steps from b.
func (p *pattern) match(b *budget, s string) bool {
	b.spend((len(s) + 1) * (1 + p.weight/patternWeightPerStep))
	return p.MatchString(s)
}

// clipText cuts a schema's text for an error message.
func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// patternIndex is a patternProperties, arranged so that a field name is
// tried only against the patterns that may match it.
type patternIndex struct {
	// anchored are the patterns with a literal prefix, by that prefix;
	// lengths are the lengths of those prefixes, each once.
	anchored map[string][]patternSchema
	lengths  []int
	// rest are the patterns tried on every name.
	rest []patternSchema
}

type patternSchema struct {
	re  *pattern
	sch *jsonschema.Schema
}

func newPatternIndex(props map[jsonschema.Regexp]*jsonschema.Schema) *patternIndex {
	ix := &patternIndex{anchored: map[string][]patternSchema{}}
	for re, sch := range props {
		p := re.(*pattern)
		ps := patternSchema{re: p, sch: sch}
		if p.prefix == "" {
			ix.rest = append(ix.rest, ps)
			continue
		}
		if _, seen := ix.anchored[p.prefix]; !seen && !slices.Contains(ix.lengths, len(p.prefix)) {
			ix.lengths = append(ix.lengths, len(p.prefix))
		}
		ix.anchored[p.prefix] = append(ix.anchored[p.prefix], ps)
	}
	slices.Sort(ix.lengths)
	return ix
}

// appendMatching appends the schema of each pattern that matches name.
func (ix *patternIndex) appendMatching(b *budget, schemas []*jsonschema.Schema, name string) []*jsonschema.Schema {
	for _, n := range ix.lengths {
		if n > len(name) {
			break
		}
		b.spend(1 + n/64)
		for _, ps := range ix.anchored[name[:n]] {
			if ps.re.match(b, name) {
				schemas = append(schemas, ps.sch)
			}
		}
	}
	for _, ps := range ix.rest {
		if ps.re.match(b, name) {
			schemas = append(schemas, ps.sch)
		}
	}
	return schemas
}

// regexFormat is the "regex" format's verdict on s, as the validator's
// (Go's regexp compiles it), from what parsing it says.
func (e *evaluation) regexFormat(s string) error {
	if len(s) > maxRegexFormat {
		panic(stopped{ErrOverBudget})
	}
	if err, found := e.regexes[s]; found {
		e.budget.spendBytes(len(s), 64)
		return err
	}
	e.budget.spend(regexParseSteps * (len(s) + 1))
	_, err := syntax.Parse(s, syntax.Perl)
	if len(e.regexes) < maxRegexVerdicts {
		if e.regexes == nil {
			e.regexes = make(map[string]error)
		}
		e.regexes[s] = err
	}
	return err
}
