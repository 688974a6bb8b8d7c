package envelope

import (
	"math"
	"slices"
	"strconv"
)

// Envelope is one <tool_error>. The zero Severity renders as "error".
type Envelope struct {
	Code     Code
	Severity Severity
	// Message says what happened. Always rendered, even when empty.
	Message string
	// Recovery says what to do next. Rendered when not empty.
	Recovery string
	// Actions are tool or action names the model may call instead, in order.
	Actions []string
	// Details are key/value facts, rendered in insertion order.
	Details []Detail
	// RetryAfter is the delay in seconds before a retry makes sense. Rendered
	// only when finite and > 0.
	RetryAfter float64
}

// Detail is one <detail key="Key">Value</detail> line.
type Detail struct {
	Key   string
	Value string
}

// IsError is the isError flag of a tools/call result carrying e.
func (e *Envelope) IsError() bool { return e.severity().IsError() }

func (e *Envelope) severity() Severity {
	if e.Severity == "" {
		return SeverityError
	}
	return e.Severity
}

// HasRetryAfter reports whether e carries a retry delay, that is whether
// <retry_after> is rendered.
func (e *Envelope) HasRetryAfter() bool {
	return e.RetryAfter > 0 && !math.IsInf(e.RetryAfter, 1)
}

// RetryAfterSeconds is the retry delay in whole seconds, rounded up, as the
// HTTP Retry-After header carries it; 0 when e has no retry delay.
func (e *Envelope) RetryAfterSeconds() int64 {
	if !e.HasRetryAfter() {
		return 0
	}
	s := math.Ceil(e.RetryAfter)
	if s >= math.MaxInt64 { // int64(s) would overflow
		return math.MaxInt64
	}
	return int64(s)
}

// Text renders e as the reference implementation does.
func (e *Envelope) Text() string { return string(e.AppendText(nil)) }

// AppendText appends the rendered envelope to dst.
func (e *Envelope) AppendText(dst []byte) []byte {
	dst = append(dst, `<tool_error code="`...)
	dst = appendAttr(dst, string(e.Code))
	dst = append(dst, `" severity="`...)
	dst = appendAttr(dst, string(e.severity()))
	dst = append(dst, "\">\n<message>"...)
	dst = appendText(dst, e.Message)
	dst = append(dst, "</message>\n"...)
	if e.Recovery != "" {
		dst = append(dst, "<recovery>"...)
		dst = appendText(dst, e.Recovery)
		dst = append(dst, "</recovery>\n"...)
	}
	if len(e.Actions) > 0 {
		dst = append(dst, "<available_actions>\n"...)
		for _, a := range e.Actions {
			dst = append(dst, "  <action>"...)
			dst = appendText(dst, a)
			dst = append(dst, "</action>\n"...)
		}
		dst = append(dst, "</available_actions>\n"...)
	}
	if len(e.Details) > 0 {
		dst = append(dst, "<details>\n"...)
		for _, d := range e.Details {
			dst = append(dst, `  <detail key="`...)
			dst = appendAttr(dst, d.Key)
			dst = append(dst, `">`...)
			dst = appendText(dst, d.Value)
			dst = append(dst, "</detail>\n"...)
		}
		dst = append(dst, "</details>\n"...)
	}
	if e.HasRetryAfter() {
		dst = append(dst, "<retry_after>"...)
		dst = AppendNumber(dst, e.RetryAfter)
		dst = append(dst, " seconds</retry_after>\n"...)
	}
	return append(dst, "</tool_error>"...)
}

// appendText escapes element text: only & and <, so that > and quotes stay
// readable for the model while no text can open or close an element.
func appendText(dst []byte, s string) []byte { return appendEscaped(dst, s, false) }

// appendAttr escapes an attribute value: all five XML entities.
func appendAttr(dst []byte, s string) []byte { return appendEscaped(dst, s, true) }

// AppendText appends s escaped as the envelope escapes element text, for
// sections written beside an envelope (<contract_awareness>).
func AppendText(dst []byte, s string) []byte { return appendText(dst, s) }

// AppendAttr appends s escaped as the envelope escapes attribute values.
func AppendAttr(dst []byte, s string) []byte { return appendAttr(dst, s) }

func appendEscaped(dst []byte, s string, attr bool) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		esc := entity(s[i], attr)
		if esc == "" {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, esc...)
		start = i + 1
	}
	return append(dst, s[start:]...)
}

// entity is the escape of c in text, or with attr in an attribute value;
// "" when c stands as it is.
func entity(c byte, attr bool) string {
	switch c {
	case '&':
		return "&amp;"
	case '<':
		return "&lt;"
	}
	if !attr {
		return ""
	}
	switch c {
	case '>':
		return "&gt;"
	case '"':
		return "&quot;"
	case '\'':
		return "&apos;"
	}
	return ""
}

// AppendNumber appends f as JavaScript's Number#toString writes it: the
// shortest decimal that reads back as f ("30", "1.5"), switching to
// exponent form below 1e-6 and from 1e21 on ("1e-7", "1e+21"). -0 is "0",
// and the non-finite values are "NaN", "Infinity" and "-Infinity".
func AppendNumber(dst []byte, f float64) []byte {
	switch {
	case f == 0:
		return append(dst, '0')
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go writes at least two exponent digits ("1e-07"); JavaScript does not.
	for i := start; i < len(dst)-2; i++ {
		if dst[i] == 'e' && dst[i+2] == '0' {
			return append(dst[:i+2], dst[i+3:]...)
		}
	}
	return dst
}

// Builder assembles an Envelope fluently, in the manner of the reference's
// error builder:
//
//	env := envelope.New(envelope.NotFound, "No invoice with that ID").
//		Suggest("List invoices first, then retry with a real ID").
//		Actions("billing.list_invoices").
//		Details(envelope.Detail{Key: "requestedId", Value: "inv_2026_9999"}).
//		RetryAfter(30).
//		Envelope()
type Builder struct {
	e Envelope
}

// New starts an envelope with severity "error".
func New(code Code, message string) *Builder {
	return &Builder{e: Envelope{Code: code, Severity: SeverityError, Message: message}}
}

// Suggest sets the recovery text.
func (b *Builder) Suggest(recovery string) *Builder {
	b.e.Recovery = recovery
	return b
}

// Actions appends available actions.
func (b *Builder) Actions(actions ...string) *Builder {
	b.e.Actions = append(b.e.Actions, actions...)
	return b
}

// Severity sets the severity.
func (b *Builder) Severity(s Severity) *Builder {
	b.e.Severity = s
	return b
}

// Warning marks the envelope as guidance on the success path (isError false).
func (b *Builder) Warning() *Builder { return b.Severity(SeverityWarning) }

// Critical marks the envelope as a failure that must not be retried blindly.
func (b *Builder) Critical() *Builder { return b.Severity(SeverityCritical) }

// Details merges details: a key already present keeps its position and takes
// the new value; a new key is appended.
func (b *Builder) Details(details ...Detail) *Builder {
next:
	for _, d := range details {
		for i := range b.e.Details {
			if b.e.Details[i].Key == d.Key {
				b.e.Details[i].Value = d.Value
				continue next
			}
		}
		b.e.Details = append(b.e.Details, d)
	}
	return b
}

// RetryAfter sets the retry delay in seconds.
func (b *Builder) RetryAfter(seconds float64) *Builder {
	b.e.RetryAfter = seconds
	return b
}

// Envelope returns the envelope built so far. Later calls on b do not change
// what it returned.
func (b *Builder) Envelope() Envelope {
	e := b.e
	e.Actions = slices.Clone(e.Actions)
	e.Details = slices.Clone(e.Details)
	return e
}
