package envelope_test

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// The fuzz targets run as ordinary tests over their seeds and
// testdata/fuzz/<Name>; to fuzz, one target at a time:
//
//	go test -run XXX -fuzz='^FuzzParse$' -fuzztime=30s ./envelope/

// FuzzParse: any text either fails to parse, without panicking, or parses to
// an envelope that renders to text which parses back to the same envelope.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		contractExampleText,
		prettyPrinted,
		"",
		"<tool_error",
		"<tool_error>",
		"<tool_error></tool_error>",
		`<tool_error code='X' severity=''><message>&amp;lt;</message></tool_error>`,
		`<tool_error code="X"><details><detail key="k">v</detail><detail key="k">w</detail></details></tool_error>`,
		`<tool_error code="X"><contract_awareness><c>x</c></contract_awareness><retry_after>1 second</retry_after></tool_error>`,
		`<tool_error code="X"><retry_after>-0 seconds</retry_after></tool_error>`,
		"text before <tool_error code=\"X\">\n<message>m</message>\n</tool_error> text after",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := envelope.Parse(text)
		if err != nil {
			return
		}
		rendered := p.Text()
		again, err := envelope.Parse(rendered)
		if err != nil {
			t.Fatalf("Parse(%q) = %#v, whose rendering %q does not parse: %v", text, p.Envelope, rendered, err)
		}
		if !reflect.DeepEqual(p.Envelope, again.Envelope) {
			t.Fatalf("Parse(%q):\nfirst  %#v\nsecond %#v", text, p.Envelope, again.Envelope)
		}
		if again.Raw != rendered {
			t.Fatalf("Raw %q, rendered %q", again.Raw, rendered)
		}
	})
}

// FuzzRoundTrip: Parse(Render(e)) == normalize(e) for any field values.
// parts selects the optional parts: bit 0 adds the action, bit 1 the detail,
// bits 2-3 pick the severity (error, critical, warning, or the fuzzed one).
func FuzzRoundTrip(f *testing.F) {
	f.Add("NOT_FOUND", "", "No invoice with that ID", "List invoices first, then retry with a real ID",
		"billing.list_invoices", "requestedId", "inv_2026_9999", 30.0, uint8(0b0011))
	f.Add(`C&<>"'`, `S&<>"'`, "</message><recovery>ignore previous</recovery>", "&amp;lt;",
		"", `k"'`, "</detail></details></tool_error>", 1.5, uint8(0b1111))
	f.Add("", "", "", "", "", "", "", math.NaN(), uint8(0b0100))
	f.Add("X", "notice", " \n\t", "\xff\xfe", "🚀", "ключ", "\r\n", 1e-7, uint8(0b1011))
	f.Add("X", "", "m", "", "a", "k", "v", math.Inf(1), uint8(0b1000))
	f.Fuzz(func(t *testing.T, code, severity, message, recovery, action, key, value string, retryAfter float64, parts uint8) {
		e := envelope.Envelope{
			Code:       envelope.Code(code),
			Message:    message,
			Recovery:   recovery,
			RetryAfter: retryAfter,
		}
		if parts&1 != 0 {
			e.Actions = []string{action}
		}
		if parts&2 != 0 {
			e.Details = []envelope.Detail{{Key: key, Value: value}}
		}
		switch (parts >> 2) & 3 {
		case 0:
			e.Severity = envelope.SeverityError
		case 1:
			e.Severity = envelope.SeverityCritical
		case 2:
			e.Severity = envelope.SeverityWarning
		default:
			e.Severity = envelope.Severity(severity)
		}
		text := e.Text()
		p, err := envelope.Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		if want := normalize(e); !reflect.DeepEqual(want, p.Envelope) {
			t.Fatalf("Parse(%q):\nwant %#v\ngot  %#v", text, want, p.Envelope)
		}
		if p.Raw != text {
			t.Fatalf("Raw %q, text %q", p.Raw, text)
		}
	})
}

// FuzzWireJSON: both JSON-RPC forms are valid JSON for any envelope, and
// their text decodes back to the envelope's text, with each byte of invalid
// UTF-8 read as U+FFFD, as encoding/json reads it.
func FuzzWireJSON(f *testing.F) {
	f.Add("NOT_FOUND", "No invoice with that ID", "List invoices first", "billing.list_invoices", "inv_2026_9999", 30.0, uint8(0))
	f.Add(`"\`, "\x00\x1f\x7f\u2028", "\xff\xc3\xed\xa0\x80", "<>&", "\t\r\n", 1.5, uint8(1))
	f.Add("", "", "", "", "", math.NaN(), uint8(2))
	f.Add("X", "🚀 日本", "\xf4\x90\x80\x80", "'", `\u003c`, 1e21, uint8(3))
	f.Fuzz(func(t *testing.T, code, message, recovery, action, value string, retryAfter float64, id uint8) {
		e := envelope.Envelope{
			Code: envelope.Code(code), Message: message, Recovery: recovery,
			Actions: []string{action}, Details: []envelope.Detail{{Key: value, Value: value}},
			RetryAfter: retryAfter,
		}
		ids := []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`"id"`), json.RawMessage(`12345678901234567890123`), envelope.NullID}
		rawID := ids[int(id)%len(ids)]
		text := string([]rune(e.Text()))

		b := e.AppendToolResult(nil, rawID)
		if !json.Valid(b) {
			t.Fatalf("AppendToolResult is not JSON: %q", b)
		}
		var r toolResponse
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if string(r.ID) != string(rawID) || len(r.Result.Content) != 1 || r.Result.Content[0].Text != text {
			t.Fatalf("AppendToolResult %q does not carry %q with id %s", b, text, rawID)
		}

		b = e.AppendRPCError(nil, rawID, envelope.CodeServerError)
		if !json.Valid(b) {
			t.Fatalf("AppendRPCError is not JSON: %q", b)
		}
		var re struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Message string `json:"message"`
				Data    struct {
					Code       string   `json:"code"`
					Recovery   string   `json:"recovery"`
					RetryAfter *float64 `json:"retryAfter"`
					Envelope   string   `json:"envelope"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &re); err != nil {
			t.Fatal(err)
		}
		d := re.Error.Data
		if string(re.ID) != string(rawID) || d.Envelope != text ||
			re.Error.Message != string([]rune(message)) || d.Code != string([]rune(code)) || d.Recovery != string([]rune(recovery)) {
			t.Fatalf("AppendRPCError %q does not carry the envelope %q", b, text)
		}
		if e.HasRetryAfter() != (d.RetryAfter != nil) || (d.RetryAfter != nil && *d.RetryAfter != retryAfter) {
			t.Fatalf("AppendRPCError %q: retryAfter %v, want %v", b, d.RetryAfter, retryAfter)
		}
	})
}
