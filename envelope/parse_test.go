package envelope_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
)

func TestParseReadsEveryPart(t *testing.T) {
	p, err := envelope.Parse(contractExampleText)
	require.NoError(t, err)
	assert.Equal(t, envelope.NotFound, p.Code)
	assert.Equal(t, envelope.SeverityError, p.Severity)
	assert.Equal(t, "No invoice with that ID", p.Message)
	assert.Equal(t, "List invoices first, then retry with a real ID", p.Recovery)
	assert.Equal(t, []string{"billing.list_invoices"}, p.Actions)
	assert.Equal(t, []envelope.Detail{{Key: "requestedId", Value: "inv_2026_9999"}}, p.Details)
	assert.Equal(t, 30.0, p.RetryAfter)
	assert.Equal(t, contractExampleText, p.Raw)
	assert.Equal(t, contractExample(), p.Envelope)
}

func TestParseFindsTheEnvelopeInsideSurroundingText(t *testing.T) {
	text := "The tool said:\n\n" + contractExampleText + "\n\nPlease advise. <tool_error>"
	p, err := envelope.Parse(text)
	require.NoError(t, err)
	assert.Equal(t, contractExampleText, p.Raw, "Raw spans <tool_error to </tool_error>")
	assert.Equal(t, contractExample(), p.Envelope)
}

func TestParseReadsTheFirstEnvelope(t *testing.T) {
	second := msg(envelope.Timeout, "second").Envelope()
	p, err := envelope.Parse(contractExampleText + "\n" + second.Text())
	require.NoError(t, err)
	assert.Equal(t, contractExampleText, p.Raw)
}

func TestParseSkipsLongerElementNames(t *testing.T) {
	text := `<tool_errors count="1"><tool_error_list/></tool_errors>` + contractExampleText
	p, err := envelope.Parse(text)
	require.NoError(t, err)
	assert.Equal(t, contractExampleText, p.Raw)
}

// prettyPrinted is the envelope as the documentation page shows it.
const prettyPrinted = `<tool_error code="NOT_FOUND" severity="error">
  <message>No invoice with that ID</message>
  <recovery>List invoices first, then retry with a real ID</recovery>
  <available_actions>
    <action>billing.list_invoices</action>
  </available_actions>
  <details>
    <detail key="requestedId">inv_2026_9999</detail>
  </details>
  <retry_after>30 seconds</retry_after>
</tool_error>`

func TestParseAcceptsThePrettyPrintedForm(t *testing.T) {
	p, err := envelope.Parse(prettyPrinted)
	require.NoError(t, err)
	assert.Equal(t, contractExample(), p.Envelope)
	assert.Equal(t, prettyPrinted, p.Raw)

	crlf := strings.ReplaceAll(prettyPrinted, "\n", "\r\n")
	p, err = envelope.Parse(crlf)
	require.NoError(t, err)
	assert.Equal(t, contractExample(), p.Envelope, "CRLF line ends and tabs between elements are whitespace")
}

func TestParseAcceptsSingleQuotedAndSpacedAttributes(t *testing.T) {
	text := "<tool_error code='NOT_FOUND'\n\tseverity = 'warning' >" +
		`<message>m</message><details><detail key='say "hi"'>v</detail></details></tool_error>`
	p, err := envelope.Parse(text)
	require.NoError(t, err)
	assert.Equal(t, envelope.NotFound, p.Code)
	assert.Equal(t, envelope.SeverityWarning, p.Severity)
	assert.Equal(t, []envelope.Detail{{Key: `say "hi"`, Value: "v"}}, p.Details)
}

func TestParseGivesEachDetailItsOwnKey(t *testing.T) {
	p, err := envelope.Parse(`<tool_error code="X"><details><detail id="1" key="a">1</detail>` +
		`<detail key="b" key="c">2</detail><detail lang="en" key='d'>3</detail></details></tool_error>`)
	require.NoError(t, err)
	assert.Equal(t, []envelope.Detail{{Key: "a", Value: "1"}, {Key: "c", Value: "2"}, {Key: "d", Value: "3"}}, p.Details,
		"a repeated attribute keeps the last value, as in the open tag")
}

func TestParseIgnoresUnknownAttributes(t *testing.T) {
	p, err := envelope.Parse(`<tool_error version="2" code="X" lang='en'><message x="1">m</message></tool_error>`)
	require.NoError(t, err)
	assert.Equal(t, envelope.Envelope{Code: "X", Severity: envelope.SeverityError, Message: "m"}, p.Envelope)
}

func TestParseSkipsUnknownSections(t *testing.T) {
	text := `<tool_error code="VALIDATION_ERROR" severity="error">
<message>Invalid arguments</message>
<contract_awareness tool="billing.get_invoice">
  <change kind="BREAKING">id became a string</change>
  <change kind="RISKY">limit max lowered</change>
</contract_awareness>
<recovery>Fix id</recovery>
<validation_error action="billing.get_invoice">
<field name="id">Bad</field>
</validation_error>
<retry_after>2 seconds</retry_after>
</tool_error>`
	p, err := envelope.Parse(text)
	require.NoError(t, err)
	assert.Equal(t, envelope.Envelope{
		Code: envelope.ValidationError, Severity: envelope.SeverityError,
		Message: "Invalid arguments", Recovery: "Fix id", RetryAfter: 2,
	}, p.Envelope)
}

func TestParseReadsMissingSeverityAsError(t *testing.T) {
	for _, text := range []string{
		`<tool_error code="X"><message>m</message></tool_error>`,
		`<tool_error code="X" severity=""><message>m</message></tool_error>`,
		`<tool_error><message>m</message></tool_error>`,
	} {
		p, err := envelope.Parse(text)
		require.NoError(t, err, text)
		assert.Equal(t, envelope.SeverityError, p.Severity, text)
	}
}

func TestParseReadsMissingPartsAsZero(t *testing.T) {
	p, err := envelope.Parse(`<tool_error code="X" severity="critical"></tool_error>`)
	require.NoError(t, err)
	assert.Equal(t, envelope.Envelope{Code: "X", Severity: envelope.SeverityCritical}, p.Envelope)

	p, err = envelope.Parse("<tool_error code=\"X\">\n<available_actions>\n</available_actions>\n<details></details>\n</tool_error>")
	require.NoError(t, err)
	assert.Nil(t, p.Actions, "an empty list reads as nil")
	assert.Nil(t, p.Details, "an empty list reads as nil")
}

func TestParseUnescapesEntitiesWithAmpersandLast(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"&amp;lt;", "&lt;"},
		{"&amp;amp;", "&amp;"},
		{"&amp;#39;", "&#39;"},
		{"&lt;b&gt;", "<b>"},
		{"&quot;q&quot; &apos;a&apos; &#39;b&#39; &#34;c&#34;", `"q" 'a' 'b' "c"`},
		{"a > b \"c\"", "a > b \"c\""},
		{"&unknown; & &amp", "&unknown; & &amp"},
		{"&lt;/message>", "</message>"},
	} {
		text := `<tool_error code="` + c.in + `" severity="` + c.in + `">` +
			"<message>" + c.in + "</message><recovery>" + c.in + "</recovery>" +
			"<available_actions><action>" + c.in + "</action></available_actions>" +
			`<details><detail key="` + c.in + `">` + c.in + "</detail></details></tool_error>"
		if strings.ContainsAny(c.in, `"`) {
			text = strings.ReplaceAll(text, `="`+c.in+`"`, `='`+c.in+`'`)
		}
		p, err := envelope.Parse(text)
		require.NoError(t, err, c.in)
		assert.Equal(t, envelope.Envelope{
			Code: envelope.Code(c.want), Severity: envelope.Severity(c.want),
			Message: c.want, Recovery: c.want, Actions: []string{c.want},
			Details: []envelope.Detail{{Key: c.want, Value: c.want}},
		}, p.Envelope, c.in)
	}
}

func TestParseReadsRetryAfter(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
	}{
		{"30 seconds", 30},
		{"1.5 seconds", 1.5},
		{"0.25 seconds", 0.25},
		{"1e-7 seconds", 1e-7},
		{"1e+21 seconds", 1e21},
		{"1 second", 1},
		{" 3 seconds\n", 3},
		{"0 seconds", 0},
	} {
		p, err := envelope.Parse(`<tool_error code="RATE_LIMITED"><message>m</message><retry_after>` + c.in + `</retry_after></tool_error>`)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, p.RetryAfter, c.in)
	}
}

func TestParseReportsMalformedEnvelopesAsErrors(t *testing.T) {
	for _, c := range []struct{ name, text string }{
		{"unclosed envelope", `<tool_error code="X"><message>m</message>`},
		{"unclosed envelope after the open tag", `<tool_error code="X">`},
		{"unterminated open tag", `<tool_error code="X"`},
		{"unclosed element", `<tool_error code="X"><message>m</tool_error>`},
		{"unclosed list item", `<tool_error code="X"><available_actions><action>a</available_actions></tool_error>`},
		{"attribute without value", `<tool_error code><message>m</message></tool_error>`},
		{"attribute without name", `<tool_error ="X"><message>m</message></tool_error>`},
		{"unquoted attribute", `<tool_error code=X><message>m</message></tool_error>`},
		{"unterminated attribute", `<tool_error code="X><message>m</message></tool_error>`},
		{"text where an element belongs", `<tool_error code="X">hello<message>m</message></tool_error>`},
		{"empty element name", `<tool_error code="X">< message>m</message></tool_error>`},
		{"stray closing tag", `<tool_error code="X"></message></tool_error>`},
		{"foreign element in actions", `<tool_error code="X"><available_actions><detail key="k">v</detail></available_actions></tool_error>`},
		{"detail without key", `<tool_error code="X"><details><detail>v</detail></details></tool_error>`},
		{"detail without key beside one with two", `<tool_error code="X"><details><detail>a</detail><detail key="x" key="y">b</detail></details></tool_error>`},
		{"retry_after without unit", `<tool_error code="X"><retry_after>30</retry_after></tool_error>`},
		{"retry_after in minutes", `<tool_error code="X"><retry_after>1 minutes</retry_after></tool_error>`},
		{"retry_after not a number", `<tool_error code="X"><retry_after>soon seconds</retry_after></tool_error>`},
		{"retry_after empty", `<tool_error code="X"><retry_after></retry_after></tool_error>`},
		{"retry_after out of range", `<tool_error code="X"><retry_after>1e999 seconds</retry_after></tool_error>`},
		{"retry_after NaN", `<tool_error code="X"><retry_after>NaN seconds</retry_after></tool_error>`},
		{"retry_after infinite", `<tool_error code="X"><retry_after>Inf seconds</retry_after></tool_error>`},
		{"retry_after negative", `<tool_error code="X"><retry_after>-5 seconds</retry_after></tool_error>`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = envelope.Parse(c.text) })
			require.Error(t, err)
			assert.NotErrorIs(t, err, envelope.ErrNoEnvelope, "the envelope was found, it is malformed")
			assert.True(t, strings.HasPrefix(err.Error(), "envelope: "), "errors name the package: %v", err)
		})
	}
}

func TestParseReportsNoEnvelope(t *testing.T) {
	for _, text := range []string{
		"", "plain text", "<tool_error", "<tool_errors code=\"X\"></tool_errors>",
		"</tool_error>", "<validation_error action=\"x\"></validation_error>",
	} {
		p, err := envelope.Parse(text)
		assert.ErrorIs(t, err, envelope.ErrNoEnvelope, "%q", text)
		assert.Equal(t, envelope.Parsed{}, p)
	}
}

// resultJSON builds a CallToolResult whose content is the given blocks.
func resultJSON(t *testing.T, blocks ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"content": blocks, "isError": true})
	require.NoError(t, err)
	return b
}

func TestParseResultFindsTheEnvelopeInTheTextBlocks(t *testing.T) {
	b := resultJSON(t,
		map[string]any{"type": "image", "data": "aGk=", "mimeType": "image/png", "text": contractExampleText},
		map[string]any{"type": "text", "text": "Here is what happened:"},
		map[string]any{"type": "text", "text": "Details follow.\n" + contractExampleText},
		map[string]any{"type": "text", "text": `<tool_error code="TIMEOUT"><message>later block</message></tool_error>`},
	)
	p, err := envelope.ParseResult(b)
	require.NoError(t, err)
	assert.Equal(t, contractExample(), p.Envelope)
	assert.Equal(t, contractExampleText, p.Raw)
}

func TestParseResultReadsWhatAppendCallToolResultWrites(t *testing.T) {
	e := everyTextField("</message> & <tag> \"q\" 'a'\n\xff")
	p, err := envelope.ParseResult(e.AppendCallToolResult(nil))
	require.NoError(t, err)
	want := everyTextField("</message> & <tag> \"q\" 'a'\n\uFFFD")
	assert.Equal(t, want, p.Envelope)
}

func TestParseResultReportsErrors(t *testing.T) {
	_, err := envelope.ParseResult([]byte(`{"content":[`))
	assert.Error(t, err)
	assert.NotErrorIs(t, err, envelope.ErrNoEnvelope)

	for _, b := range [][]byte{
		[]byte(`{}`),
		[]byte(`{"content":[]}`),
		resultJSON(t, map[string]any{"type": "text", "text": "no envelope here"}),
		resultJSON(t, map[string]any{"type": "resource", "text": contractExampleText}),
	} {
		_, err := envelope.ParseResult(b)
		assert.ErrorIs(t, err, envelope.ErrNoEnvelope, "%s", b)
	}

	_, err = envelope.ParseResult(resultJSON(t, map[string]any{"type": "text", "text": `<tool_error code="X"><message>`}))
	assert.Error(t, err, "a malformed envelope is an error, not a miss")
	assert.NotErrorIs(t, err, envelope.ErrNoEnvelope)
}
