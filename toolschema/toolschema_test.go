package toolschema

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/cputime"
)

var update = flag.Bool("update", false, "rewrite testdata/wording.golden from the current output")

// mustCheck is Check, which must run to its end.
func mustCheck(t testing.TB, s *Schema, args []byte) []envelope.FieldProblem {
	t.Helper()
	problems, err := s.Check(t.Context(), args)
	require.NoError(t, err)
	return problems
}

// mustCheckCall is CheckCall, which must run to its end.
func mustCheckCall(t testing.TB, s *Schema, body []byte) []envelope.FieldProblem {
	t.Helper()
	problems, err := s.CheckCall(t.Context(), body)
	require.NoError(t, err)
	return problems
}

// invoice is a tool schema using the keywords models most often break.
const invoice = `{
	"type": "object",
	"properties": {
		"id": {"type": "string", "format": "email"},
		"status": {"type": "string", "enum": ["draft", "sent", "paid"]},
		"limit": {"type": "integer", "minimum": 1, "maximum": 100},
		"ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25},
		"code": {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^[A-Z]+$"},
		"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3, "uniqueItems": true},
		"kind": {"const": "invoice"},
		"when": {"type": "string", "format": "date"},
		"site": {"type": "string", "format": "uri"},
		"lines": {"type": "array", "items": {
			"type": "object",
			"properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
			"required": ["sku", "qty"],
			"additionalProperties": false
		}},
		"meta": {"type": "object", "minProperties": 1, "maxProperties": 2},
		"shape": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
		"note": {"type": ["string", "null"]},
		"email": {"type": "string"}
	},
	"required": ["id", "status"],
	"additionalProperties": false,
	"dependentRequired": {"ratio": ["limit"]}
}`

// wordingCases are arguments breaking one or more keywords each; the
// golden file holds what the model is told for each.
var wordingCases = []struct{ name, args string }{
	{"valid", `{"id":"a@example.com","status":"paid"}`},
	{"required and type", `{"status":3}`},
	{"format email", `{"id":"not-an-email","status":"draft"}`},
	{"enum", `{"id":"a@example.com","status":"late"}`},
	{"minimum and maximum", `{"id":"a@example.com","status":"paid","limit":0,"lines":[{"sku":"x","qty":0}]}`},
	{"maximum", `{"id":"a@example.com","status":"paid","limit":101}`},
	{"exclusive bounds and multipleOf", `{"id":"a@example.com","status":"paid","limit":5,"ratio":1.1}`},
	{"multipleOf", `{"id":"a@example.com","status":"paid","limit":5,"ratio":0.3}`},
	{"string length and pattern", `{"id":"a@example.com","status":"paid","code":"ab"}`},
	{"maxLength and pattern", `{"id":"a@example.com","status":"paid","code":"abcdefghij"}`},
	{"array bounds", `{"id":"a@example.com","status":"paid","tags":[]}`},
	{"array too long, duplicates", `{"id":"a@example.com","status":"paid","tags":["a","a","b","c"]}`},
	{"const", `{"id":"a@example.com","status":"paid","kind":"receipt"}`},
	{"date and uri", `{"id":"a@example.com","status":"paid","when":"yesterday","site":"example"}`},
	{"unknown field, near", `{"id":"a@example.com","status":"paid","emial":"x"}`},
	{"unknown field, far", `{"id":"a@example.com","status":"paid","zzzzzzzzzz":true}`},
	{"nested", `{"id":"a@example.com","status":"paid","lines":[{"sku":"x","qty":2},{"skew":"y"}]}`},
	{"object bounds", `{"id":"a@example.com","status":"paid","meta":{}}`},
	{"oneOf", `{"id":"a@example.com","status":"paid","shape":true}`},
	{"type union", `{"id":"a@example.com","status":"paid","note":5}`},
	{"dependentRequired", `{"id":"a@example.com","status":"paid","ratio":0.5}`},
	{"long string sent", `{"id":"` + strings.Repeat("x", 80) + `","status":"paid"}`},
	{"root not an object", `[1,2]`},
	{"not JSON", `{"id":`},
	{"absent", ``},
}

// extras uses the keywords invoice does not, and the ways a union fails.
const extras = `{
	"type": "object",
	"properties": {
		"score": {"type": "number", "exclusiveMinimum": 0},
		"meta": {"type": "object", "maxProperties": 2},
		"labels": {"type": "array", "contains": {"type": "string", "pattern": "^team-"}, "minContains": 1, "maxContains": 2},
		"headers": {"type": "object", "propertyNames": {"pattern": "^[a-z-]+$"}},
		"owner": {"anyOf": [{"type": "string"}, {"type": "null"}]},
		"target": {"oneOf": [
			{"type": "object", "properties": {"kind": {"const": "user"}, "id": {"type": "integer"}}, "required": ["kind", "id"]},
			{"type": "string"}
		]},
		"amount": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
		"shape": {"anyOf": [{"type": "object", "required": ["w"]}, {"type": "object", "required": ["r"]}]},
		"mode": {"not": {"const": "debug"}},
		"legacy": false,
		"extra": {"type": "object", "properties": {"name": {"type": "string"}}, "unevaluatedProperties": false},
		"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}
	}
}`

var extrasCases = []struct{ name, args string }{
	{"exclusiveMinimum", `{"score":0}`},
	{"maxProperties", `{"meta":{"a":1,"b":2,"c":3}}`},
	{"contains", `{"labels":["ops"]}`},
	{"maxContains", `{"labels":["team-a","team-b","team-c"]}`},
	{"propertyNames", `{"headers":{"Bad Name":"1"}}`},
	{"an object sent: its JSON, fields by name, nothing escaped but the envelope's &amp; and &lt;", `{"meta":{"z":"<b>&","a":1,"m":2}}`},
	{"anyOf of types", `{"owner":5}`},
	{"oneOf, the one branch that fits", `{"target":{"kind":"user","id":"7"}}`},
	{"oneOf, two branches match", `{"amount":5}`},
	{"anyOf, no branch fits", `{"shape":{"x":1}}`},
	{"not", `{"mode":"debug"}`},
	{"false schema", `{"legacy":1}`},
	{"unevaluatedProperties", `{"extra":{"name":"x","nmae":"y"}}`},
	{"items after prefixItems", `{"pair":["a",1,2]}`},
}

// draft07 uses the keywords only draft-07 has.
const draft07 = `{
	"$schema": "http://json-schema.org/draft-07/schema#",
	"type": "object",
	"properties": {
		"t": {"type": "array", "items": [{"type": "string"}], "additionalItems": false},
		"card": {"type": "string"}
	},
	"dependencies": {"card": ["billing"]}
}`

var draft07Cases = []struct{ name, args string }{
	{"additionalItems", `{"t":["a","b"]}`},
	{"dependencies", `{"card":"4111"}`},
}

func TestWordingOfEveryKeyword(t *testing.T) {
	var out strings.Builder
	for _, group := range []struct {
		name, schema string
		cases        []struct{ name, args string }
	}{
		{"invoice", invoice, wordingCases},
		{"extras", extras, extrasCases},
		{"draft-07", draft07, draft07Cases},
	} {
		s, err := Compile([]byte(group.schema))
		require.NoError(t, err, group.name)
		out.WriteString("# " + group.name + "\n\n")
		for _, c := range group.cases {
			out.WriteString("## " + c.name + "\n" + c.args + "\n")
			problems := mustCheck(t, s, []byte(c.args))
			if problems == nil {
				out.WriteString("(valid)\n\n")
				continue
			}
			out.WriteString(envelope.ValidationText("billing.get_invoice", problems) + "\n\n")
		}
	}
	golden := filepath.Join("testdata", "wording.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), out.String(), "go test ./toolschema -update rewrites it; review the diff")
}

func TestSchemasLoadNothing(t *testing.T) {
	for _, ref := range []string{"https://example.com/s.json", "file:///etc/passwd", "other.json"} {
		_, err := Compile([]byte(`{"type":"object","properties":{"a":{"$ref":"` + ref + `"}}}`))
		assert.Error(t, err, ref)
	}
	s, err := Compile([]byte(`{"$defs":{"n":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}}`))
	require.NoError(t, err, "a reference inside the schema")
	assert.Len(t, mustCheck(t, s, []byte(`{"a":"x"}`)), 1)
}

func TestSchemaSizeIsBounded(t *testing.T) {
	big := `{"type":"object","description":"` + strings.Repeat("x", MaxSchema) + `"}`
	_, err := Compile([]byte(big))
	assert.ErrorContains(t, err, "over the")
}

// A schema that declares draft-07 is read as draft-07: an array of items
// is a tuple there, and no schema at all in 2020-12.
func TestDraft07WhenTheSchemaSaysSo(t *testing.T) {
	tuple := `"type":"object","properties":{"t":{"type":"array","items":[{"type":"string"},{"type":"integer"}]}}}`
	s, err := Compile([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#",` + tuple))
	require.NoError(t, err)
	assert.Nil(t, mustCheck(t, s, []byte(`{"t":["a",1]}`)))
	problems := mustCheck(t, s, []byte(`{"t":["a","b"]}`))
	require.Len(t, problems, 1)
	assert.Equal(t, "t.1", problems[0].Path)
	assert.Equal(t, "Expected an integer.", problems[0].Expected)

	_, err = Compile([]byte(`{` + tuple))
	assert.Error(t, err, "2020-12 by default")
}

func TestProblemsAreBounded(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","additionalProperties":false}`))
	require.NoError(t, err)
	var args strings.Builder
	args.WriteString("{")
	for i := range 1000 {
		if i > 0 {
			args.WriteString(",")
		}
		args.WriteString(`"f` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i) + `":1`)
	}
	args.WriteString("}")
	assert.Len(t, mustCheck(t, s, []byte(args.String())), MaxProblems)
}

func TestNearestTools(t *testing.T) {
	names := []string{"search_docs", "search_code", "get_invoice", "delete_invoice", "list_invoices"}
	assert.Equal(t, []string{"get_invoice", "delete_invoice", "list_invoices"}, Nearest("get_invoce", names, 3))
	assert.Equal(t, []string{"search_code", "search_docs"}, Nearest("search", names, 2))
}

// BenchmarkCheck1KiB validates 1 KiB arguments as most tool calls carry
// them: a few typed fields and one long text (a query, a document).
func BenchmarkCheck1KiB(b *testing.B) {
	s, err := Compile([]byte(invoice))
	if err != nil {
		b.Fatal(err)
	}
	raw := []byte(`{"id":"a@example.com","status":"paid","limit":50,"code":"ABC","tags":["x","y"],"note":"` +
		strings.Repeat("Pay within thirty days of receipt. ", 26) + `"}`)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if p := mustCheck(b, s, raw); p != nil {
			b.Fatal(p)
		}
	}
}

// BenchmarkCheck1KiBManyObjects validates 1 KiB of structure: a list of
// 24 objects, each field checked (a bound on each number).
func BenchmarkCheck1KiBManyObjects(b *testing.B) {
	s, err := Compile([]byte(invoice))
	if err != nil {
		b.Fatal(err)
	}
	var args strings.Builder
	args.WriteString(`{"id":"a@example.com","status":"paid","limit":50,"code":"ABC","tags":["x","y"],"lines":[`)
	for i := range 24 {
		if i > 0 {
			args.WriteString(",")
		}
		args.WriteString(`{"sku":"SKU-000` + string(rune('0'+i%10)) + `","qty":3}`)
	}
	args.WriteString(`]}`)
	raw := []byte(args.String())
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if p := mustCheck(b, s, raw); p != nil {
			b.Fatal(p)
		}
	}
}

// The Go SDK writes additionalProperties as {"not": {}}: a field it meets
// is unknown, worded as additionalProperties: false is.
func TestNotAnythingIsAnUnknownField(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","properties":{"to":{"type":"integer"}},"required":["to"],"additionalProperties":{"not":{}}}`))
	require.NoError(t, err)
	problems := mustCheck(t, s, []byte(`{"to":1,"too":2}`))
	require.Len(t, problems, 1)
	assert.Equal(t, envelope.FieldProblem{Path: "too", Problem: "Unknown field 'too'", Sent: []byte("2"), Expected: "Did you mean 'to'?"}, problems[0])
}

// Numbers the validator would make huge big.Rats of (seconds each, or a
// panic past 1e1000000) are refused before it sees them.
func TestHugeNumbersAreRefusedCheaply(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","properties":{"n":{"type":"number","minimum":1},"ids":{"type":"array","items":{"type":"integer"}}}}`))
	require.NoError(t, err)
	for _, args := range []string{`{"n":1e1000001}`, `{"ids":[` + strings.TrimSuffix(strings.Repeat("1e999999,", 500), ",") + `]}`} {
		var problems []envelope.FieldProblem
		spent := cputime.Of(func() { problems = mustCheck(t, s, []byte(args)) })
		require.Len(t, problems, 1)
		assert.Equal(t, "A number is out of range", problems[0].Problem)
		assert.Less(t, spent, time.Second, "CPU time")
	}
	assert.Nil(t, mustCheckCall(t, s, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null}}`)), "null arguments are none")
}

func TestDeepSchemasDoNotCompile(t *testing.T) {
	deep := strings.Repeat(`{"not":`, 100) + `{}` + strings.Repeat(`}`, 100)
	_, err := Compile([]byte(deep))
	assert.ErrorContains(t, err, "nested deeper than 64")
}
