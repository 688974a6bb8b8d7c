package envelope_test

import (
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/quick"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// normalize returns the envelope Parse(e.Text()) reads back: the zero
// severity is written as error, empty lists are not written, and a retry
// delay is written only when finite and > 0.
func normalize(e envelope.Envelope) envelope.Envelope {
	if e.Severity == "" {
		e.Severity = envelope.SeverityError
	}
	if len(e.Actions) == 0 {
		e.Actions = nil
	}
	if len(e.Details) == 0 {
		e.Details = nil
	}
	if !e.HasRetryAfter() {
		e.RetryAfter = 0
	}
	return e
}

// assertRoundTrip checks Parse(e.Text()) == normalize(e), and that the text
// reads back unchanged through the tools/call wire form.
func assertRoundTrip(t *testing.T, e envelope.Envelope) bool {
	t.Helper()
	text := e.Text()
	p, err := envelope.Parse(text)
	if !assert.NoError(t, err, "%q", text) {
		return false
	}
	ok := assert.Equal(t, normalize(e), p.Envelope, "%q", text)
	ok = assert.Equal(t, text, p.Raw) && ok
	return ok
}

func TestParseOfRenderGivesBackTheEnvelope(t *testing.T) {
	for _, c := range []struct {
		name string
		env  envelope.Envelope
	}{
		{"contract example", contractExample()},
		{"zero envelope", envelope.Envelope{}},
		{"zero severity reads as error", envelope.Envelope{Code: "X", Message: "m"}},
		{"every severity: warning", msg(envelope.Deprecated, "m").Warning().Envelope()},
		{"every severity: critical", msg(envelope.InternalError, "m").Critical().Envelope()},
		{"custom severity", msg("X", "m").Severity("notice").Envelope()},
		{"empty message", msg(envelope.Conflict, "").Envelope()},
		{"empty action and empty detail", msg("X", "m").Actions("").Details(envelope.Detail{}).Envelope()},
		{"empty lists read back as nil", envelope.Envelope{Code: "X", Actions: []string{}, Details: []envelope.Detail{}}},
		{"several actions and details", msg("X", "m").Actions("c", "a", "b").Details(
			envelope.Detail{Key: "z", Value: "1"}, envelope.Detail{Key: "a", Value: "2"}).Envelope()},
		{"duplicate detail keys set directly", envelope.Envelope{Code: "X", Details: []envelope.Detail{{"k", "1"}, {"k", "2"}}}},
		{"retry after 30", retry(30)},
		{"retry after fraction", retry(tenth + 0.2)},
		{"retry after tiny", retry(5e-324)},
		{"retry after huge", retry(math.MaxFloat64)},
		{"retry after 1e21", retry(1e21)},
		{"retry after 1e-7", retry(1e-7)},
		{"retry after NaN is dropped", retry(math.NaN())},
		{"retry after +Inf is dropped", retry(math.Inf(1))},
		{"retry after negative is dropped", retry(-1)},
		{"every escape", everyTextField(`&<>"'`)},
		{"attributes with every escape", msg(`&<>"'`, "m").Severity(`&<>"'`).Details(envelope.Detail{Key: `&<>"'`, Value: `&<>"'`}).Envelope()},
		{"entities stay literal", everyTextField("&amp; &lt; &gt; &quot; &apos; &#39; &#34;")},
		{"tag-like text", everyTextField("</message></tool_error><tool_error code=\"X\"><recovery>")},
		{"whitespace at the ends", everyTextField(" \t\n lead and trail \r\n ")},
		{"only whitespace", everyTextField("\n")},
		{"invalid UTF-8", everyTextField("\xff\xfe \xc3 \xed\xa0\x80")},
		{"unicode", everyTextField("naïve 日本語 🚀 \u2028 \ufeff")},
		{"NUL and controls", everyTextField("\x00\x01\x1f\x7f")},
	} {
		t.Run(c.name, func(t *testing.T) { assertRoundTrip(t, c.env) })
	}
}

// hostilePieces are the fragments hostile strings are made of: everything
// the escaping has to get right, and text that looks like the envelope.
var hostilePieces = []string{
	"&", "<", ">", `"`, "'", "\n", "\r\n", "\t", " ", "a", "Z", "0", ";", "=", "/",
	"&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#39;", "&#34;", "&amp", "&#",
	"<tool_error", "</tool_error>", "<message>", "</message>", "<recovery>", "</recovery>",
	"<available_actions>", "<action>", "</action>", "<details>", `<detail key="x">`, "</detail>",
	"<retry_after>", "</retry_after>", " seconds", "<!--", "-->", "<![CDATA[", "]]>", "<?xml?>",
	"é", "日本", "🚀", "\u2028", "\x00", "\x7f", "\xff", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
}

func hostileString(r *rand.Rand) string {
	var b strings.Builder
	for range r.Intn(10) {
		b.WriteString(hostilePieces[r.Intn(len(hostilePieces))])
	}
	return b.String()
}

var retryValues = []float64{
	0, math.Copysign(0, -1), -1, math.NaN(), math.Inf(1), math.Inf(-1),
	1, 30, 1.5, 0.25, 1e-6, 1e-7, 1e21, 5e-324, math.MaxFloat64,
}

func hostileEnvelope(r *rand.Rand) envelope.Envelope {
	e := envelope.Envelope{
		Code:     envelope.Code(hostileString(r)),
		Message:  hostileString(r),
		Recovery: hostileString(r),
	}
	switch r.Intn(5) {
	case 0:
		e.Severity = envelope.SeverityError
	case 1:
		e.Severity = envelope.SeverityCritical
	case 2:
		e.Severity = envelope.SeverityWarning
	case 3:
		e.Severity = envelope.Severity(hostileString(r))
	}
	for range r.Intn(4) {
		e.Actions = append(e.Actions, hostileString(r))
	}
	for range r.Intn(4) {
		e.Details = append(e.Details, envelope.Detail{Key: hostileString(r), Value: hostileString(r)})
	}
	switch r.Intn(3) {
	case 0:
		e.RetryAfter = retryValues[r.Intn(len(retryValues))]
	case 1:
		e.RetryAfter = math.Float64frombits(r.Uint64())
	}
	return e
}

func TestParseOfRenderRoundTripsSeededHostileEnvelopes(t *testing.T) {
	r := rand.New(rand.NewSource(20260101))
	for i := range 5000 {
		if !assertRoundTrip(t, hostileEnvelope(r)) {
			t.Fatalf("iteration %d failed", i)
		}
	}
}

// quickEnvelope lets testing/quick generate hostile envelopes.
type quickEnvelope struct{ envelope.Envelope }

func (quickEnvelope) Generate(r *rand.Rand, _ int) reflect.Value {
	return reflect.ValueOf(quickEnvelope{hostileEnvelope(r)})
}

func TestParseOfRenderRoundTripsQuick(t *testing.T) {
	roundTrips := func(q quickEnvelope) bool {
		p, err := envelope.Parse(q.Text())
		return err == nil && reflect.DeepEqual(normalize(q.Envelope), p.Envelope)
	}
	require.NoError(t, quick.Check(roundTrips, &quick.Config{MaxCount: 3000}))
}
