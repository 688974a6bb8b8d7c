package envelope_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/envelope"
)

const validationClosing = "<recovery>Fix the fields above and call the tool again. Do not explain the error.</recovery>\n</validation_error>"

type validationCase struct {
	golden   string
	action   string
	problems []envelope.FieldProblem
	has      string // the line, or part of it, the rule is about
}

// sent is one problem on the field "v" that received the JSON raw.
func sent(raw string) []envelope.FieldProblem {
	var s json.RawMessage
	if raw != "" {
		s = json.RawMessage(raw)
	}
	return []envelope.FieldProblem{{Path: "v", Problem: "Invalid", Sent: s, Expected: "Expected something else."}}
}

func sentLine(rendered string) string {
	return `<field name="v">Invalid. You sent: ` + rendered + `. Expected something else.</field>`
}

var (
	fifty   = strings.Repeat("abcdefghij", 5)
	accents = strings.Repeat("é", 51)
	rockets = strings.Repeat("🚀", 26) // 52 UTF-16 units
)

var validationCases = []validationCase{
	{golden: "validation_contract_example", action: "billing.get_invoice",
		problems: []envelope.FieldProblem{{Path: "id", Problem: "Invalid email format", Sent: json.RawMessage(`"not-an-email"`), Expected: "Expected a valid email address."}},
		has:      `<field name="id">Invalid email format. You sent: 'not-an-email'. Expected a valid email address.</field>`},
	{golden: "validation_sent_missing", action: "t", problems: sent(""), has: sentLine("(missing)")},
	{golden: "validation_sent_null", action: "t", problems: sent("null"), has: sentLine("null")},
	{golden: "validation_sent_short_string", action: "t", problems: sent(`"abc"`), has: sentLine("'abc'")},
	{golden: "validation_sent_empty_string", action: "t", problems: sent(`""`), has: sentLine("''")},
	{golden: "validation_sent_string_of_50_is_not_cut", action: "t", problems: sent(`"` + fifty + `"`), has: sentLine("'" + fifty + "'")},
	{golden: "validation_sent_string_of_51_is_cut_to_47", action: "t", problems: sent(`"` + fifty + `x"`), has: sentLine("'" + fifty[:47] + "...'")},
	{golden: "validation_sent_string_with_json_escapes", action: "t", problems: sent(`"line\nbreak \"q\" \u00e9"`), has: sentLine("'line\nbreak \"q\" é'")},
	{golden: "validation_sent_multibyte_string_counts_utf16_units", action: "t", problems: sent(`"` + accents + `"`), has: sentLine("'" + strings.Repeat("é", 47) + "...'")},
	{golden: "validation_sent_emoji_string_of_50_units_is_not_cut", action: "t", problems: sent(`"` + rockets[:4*25] + `"`), has: sentLine("'" + rockets[:4*25] + "'")},
	{golden: "validation_sent_emoji_string_is_cut_without_splitting_a_pair", action: "t", problems: sent(`"` + rockets + `"`), has: sentLine("'" + strings.Repeat("🚀", 23) + "...'")},
	{golden: "validation_sent_integer", action: "t", problems: sent("42"), has: sentLine("42")},
	{golden: "validation_sent_negative_fraction", action: "t", problems: sent("-3.5"), has: sentLine("-3.5")},
	{golden: "validation_sent_1_0_is_1", action: "t", problems: sent("1.0"), has: sentLine("1")},
	{golden: "validation_sent_1e21_is_exponent", action: "t", problems: sent("1e21"), has: sentLine("1e+21")},
	{golden: "validation_sent_1E2_is_100", action: "t", problems: sent("1E2"), has: sentLine("100")},
	{golden: "validation_sent_true", action: "t", problems: sent("true"), has: sentLine("true")},
	{golden: "validation_sent_false", action: "t", problems: sent("false"), has: sentLine("false")},
	{golden: "validation_sent_array", action: "t", problems: sent(`[1, "two", [3, 4], {"five": 5}]`), has: sentLine("array(4)")},
	{golden: "validation_sent_empty_array", action: "t", problems: sent(`[]`), has: sentLine("array(0)")},
	{golden: "validation_sent_object_is_compact_json", action: "t", problems: sent(`{ "a" : 1, "b" : [true, null] }`), has: sentLine(`{"a":1,"b":[true,null]}`)},
	{golden: "validation_sent_object_is_cut_to_50", action: "t",
		problems: sent(`{"description": "` + fifty + `"}`),
		has:      sentLine(`{"description":"` + fifty[:34])},
	{golden: "validation_empty_path_is_root", action: "t",
		problems: []envelope.FieldProblem{{Path: "", Problem: "Expected object, received array", Sent: json.RawMessage(`[]`)}},
		has:      `<field name="(root)">Expected object, received array. You sent: array(0).</field>`},
	{golden: "validation_nested_path", action: "orders.create",
		problems: []envelope.FieldProblem{{Path: "items.0.sku", Problem: "Required", Expected: "Expected a string."}},
		has:      `<field name="items.0.sku">Required. You sent: (missing). Expected a string.</field>`},
	{golden: "validation_without_expected_has_no_trailing_space", action: "t",
		problems: []envelope.FieldProblem{{Path: "id", Problem: "Required"}},
		has:      `<field name="id">Required. You sent: (missing).</field>`},
	{golden: "validation_escapes_attributes_and_text", action: `a&<>"'b`,
		problems: []envelope.FieldProblem{{Path: `x<"y">`, Problem: `Bad <tag> & "q"`, Sent: json.RawMessage(`"</field></validation_error>"`), Expected: "Expected a < b & c > d."}},
		has: `<validation_error action="a&amp;&lt;&gt;&quot;&apos;b">` + "\n" +
			`<field name="x&lt;&quot;y&quot;&gt;">Bad &lt;tag> &amp; "q". You sent: '&lt;/field>&lt;/validation_error>'. Expected a &lt; b &amp; c > d.</field>`},
	{golden: "validation_several_fields_in_order", action: "users.create",
		problems: []envelope.FieldProblem{
			{Path: "email", Problem: "Invalid email format", Sent: json.RawMessage(`"x"`), Expected: "Expected a valid email address."},
			{Path: "age", Problem: "Number must be greater than or equal to 0", Sent: json.RawMessage(`-1`)},
			{Path: "role", Problem: "Required", Expected: "Expected one of: admin, member."},
		},
		has: `<validation_error action="users.create">` + "\n" +
			`<field name="email">Invalid email format. You sent: 'x'. Expected a valid email address.</field>` + "\n" +
			`<field name="age">Number must be greater than or equal to 0. You sent: -1.</field>` + "\n" +
			`<field name="role">Required. You sent: (missing). Expected one of: admin, member.</field>` + "\n" +
			validationClosing},
	{golden: "validation_no_fields", action: "t", problems: nil,
		has: "<validation_error action=\"t\">\n" + validationClosing},
}

func TestValidationTextNamesWhatWasWrongSentAndExpected(t *testing.T) {
	for _, c := range validationCases {
		t.Run(c.golden, func(t *testing.T) {
			text := envelope.ValidationText(c.action, c.problems)
			assertGolden(t, c.golden, []byte(text))
			assert.Contains(t, text, c.has)
			assert.True(t, strings.HasSuffix(text, "\n"+validationClosing), "ends with the closing instruction, no trailing newline")
			assert.Equal(t, len(c.problems), strings.Count(text, "<field "), "one <field> line per problem")
		})
	}
}

func TestValidationTextMatchesTheContractExample(t *testing.T) {
	want := `<validation_error action="billing.get_invoice">
<field name="id">Invalid email format. You sent: 'not-an-email'. Expected a valid email address.</field>
<recovery>Fix the fields above and call the tool again. Do not explain the error.</recovery>
</validation_error>`
	got := envelope.ValidationText("billing.get_invoice", []envelope.FieldProblem{
		{Path: "id", Problem: "Invalid email format", Sent: json.RawMessage(`"not-an-email"`), Expected: "Expected a valid email address."},
	})
	assert.Equal(t, want, got)
}

func TestSentValueRendersWhatTheClientSent(t *testing.T) {
	units := func(s string) int { return len(utf16.Encode([]rune(s))) }
	for _, c := range []struct {
		name, sent, want string
	}{
		{"missing", "", "(missing)"},
		{"missing whitespace only", "  ", "(missing)"},
		{"null", "null", "null"},
		{"true", "true", "true"},
		{"false", "false", "false"},
		{"short string", `"hi"`, "'hi'"},
		{"string keeps its quotes", `"it's"`, "'it's'"},
		{"string of 50", `"` + fifty + `"`, "'" + fifty + "'"},
		{"string of 51", `"` + fifty + `z"`, "'" + fifty[:47] + "...'"},
		{"multi-byte string of 50 units", `"` + strings.Repeat("é", 50) + `"`, "'" + strings.Repeat("é", 50) + "'"},
		{"multi-byte string of 51 units", `"` + accents + `"`, "'" + strings.Repeat("é", 47) + "...'"},
		{"emoji of 50 units", `"` + strings.Repeat("🚀", 25) + `"`, "'" + strings.Repeat("🚀", 25) + "'"},
		{"emoji of 52 units", `"` + rockets + `"`, "'" + strings.Repeat("🚀", 23) + "...'"},
		{"surrounding whitespace", " 7 ", "7"},
		{"integer", "42", "42"},
		{"zero", "0", "0"},
		{"negative zero is 0", "-0", "0"},
		{"1.0 is 1", "1.0", "1"},
		{"fraction", "0.5", "0.5"},
		{"exponent in range", "1.5e3", "1500"},
		{"1e21", "1e21", "1e+21"},
		{"1e-7", "1e-7", "1e-7"},
		{"large integer", "12345678901234567890123", "1.2345678901234568e+22"},
		{"array", `[1,2,3]`, "array(3)"},
		{"nested array counts the top level", `[[1,2],[3]]`, "array(2)"},
		{"empty object", `{}`, "{}"},
		{"object keeps < and &", `{"h":"<b>&"}`, `{"h":"<b>&"}`},
		{"object cut to 50", `{"k":"` + fifty + `"}`, `{"k":"` + fifty[:44]},
	} {
		t.Run(c.name, func(t *testing.T) {
			var raw json.RawMessage
			if c.sent != "" {
				raw = json.RawMessage(c.sent)
			}
			got := envelope.SentValue(raw)
			assert.Equal(t, c.want, got)
			assert.LessOrEqual(t, units(got), 52, "at most 50 units and quotes")
		})
	}
}
