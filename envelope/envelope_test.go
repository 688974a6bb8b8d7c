package envelope_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/envelope"
)

func TestNewStartsWithSeverityError(t *testing.T) {
	e := envelope.New(envelope.NotFound, "m").Envelope()
	assert.Equal(t, envelope.Envelope{Code: envelope.NotFound, Severity: envelope.SeverityError, Message: "m"}, e)
	assert.Nil(t, e.Actions)
	assert.Nil(t, e.Details)
}

func TestBuilderSetsEveryPart(t *testing.T) {
	want := envelope.Envelope{
		Code:       envelope.NotFound,
		Severity:   envelope.SeverityError,
		Message:    "No invoice with that ID",
		Recovery:   "List invoices first, then retry with a real ID",
		Actions:    []string{"billing.list_invoices"},
		Details:    []envelope.Detail{{Key: "requestedId", Value: "inv_2026_9999"}},
		RetryAfter: 30,
	}
	assert.Equal(t, want, contractExample())
}

func TestBuilderLastSeverityWins(t *testing.T) {
	b := envelope.New(envelope.Deprecated, "m")
	assert.Equal(t, envelope.SeverityWarning, b.Warning().Envelope().Severity)
	assert.Equal(t, envelope.SeverityCritical, b.Critical().Envelope().Severity)
	assert.Equal(t, envelope.SeverityError, b.Severity(envelope.SeverityError).Envelope().Severity)
}

func TestBuilderActionsAppend(t *testing.T) {
	e := envelope.New(envelope.UnknownAction, "m").Actions("a").Actions().Actions("b", "c").Envelope()
	assert.Equal(t, []string{"a", "b", "c"}, e.Actions)
}

func TestBuilderDetailsMergeKeepingPosition(t *testing.T) {
	e := envelope.New(envelope.NotFound, "m").
		Details(envelope.Detail{Key: "a", Value: "1"}, envelope.Detail{Key: "b", Value: "2"}).
		Details(envelope.Detail{Key: "c", Value: "3"}, envelope.Detail{Key: "a", Value: "4"}).
		Details(envelope.Detail{Key: "d", Value: "5"}, envelope.Detail{Key: "d", Value: "6"}).
		Envelope()
	assert.Equal(t, []envelope.Detail{{"a", "4"}, {"b", "2"}, {"c", "3"}, {"d", "6"}}, e.Details)
}

func TestBuilderEnvelopeIsASnapshot(t *testing.T) {
	b := envelope.New(envelope.NotFound, "m").Actions("a").Details(envelope.Detail{Key: "k", Value: "v"})
	first := b.Envelope()
	b.Actions("b").Details(envelope.Detail{Key: "k", Value: "changed"}).Suggest("later")
	assert.Equal(t, []string{"a"}, first.Actions, "later calls do not change what was returned")
	assert.Equal(t, []envelope.Detail{{"k", "v"}}, first.Details)
	assert.Empty(t, first.Recovery)

	first.Actions[0] = "mutated"
	first.Details[0].Value = "mutated"
	second := b.Envelope()
	assert.Equal(t, []string{"a", "b"}, second.Actions, "changing a snapshot does not change the builder")
	assert.Equal(t, []envelope.Detail{{"k", "changed"}}, second.Details)
}

func TestRetryAfterSecondsRoundsUpForTheHeader(t *testing.T) {
	for _, c := range []struct {
		seconds float64
		has     bool
		header  int64
	}{
		{0, false, 0},
		{-1, false, 0},
		{math.NaN(), false, 0},
		{math.Inf(1), false, 0},
		{math.Inf(-1), false, 0},
		{1e-7, true, 1},
		{0.25, true, 1},
		{1, true, 1},
		{1.5, true, 2},
		{30, true, 30},
		{30.000001, true, 31},
		{1e21, true, math.MaxInt64},
		{math.MaxFloat64, true, math.MaxInt64},
	} {
		e := envelope.Envelope{RetryAfter: c.seconds}
		assert.Equal(t, c.has, e.HasRetryAfter(), "HasRetryAfter(%v)", c.seconds)
		assert.Equal(t, c.header, e.RetryAfterSeconds(), "RetryAfterSeconds(%v)", c.seconds)
	}
}

func TestAppendNumberWritesWhatJavaScriptWrites(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string // String(f) in JavaScript
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-32000, "-32000"},
		{30, "30"},
		{1.5, "1.5"},
		{0.25, "0.25"},
		{tenth + 0.2, "0.30000000000000004"},
		{1e-6, "0.000001"},
		{1.5e-6, "0.0000015"},
		{1e-7, "1e-7"},
		{-1.5e-7, "-1.5e-7"},
		{123e-20, "1.23e-18"},
		{5e-324, "5e-324"},
		{1e20, "100000000000000000000"},
		{123456789012345680000, "123456789012345680000"},
		{1e21, "1e+21"},
		{1.5e21, "1.5e+21"},
		{1e100, "1e+100"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
	} {
		assert.Equal(t, c.want, string(envelope.AppendNumber(nil, c.f)), "AppendNumber(%v)", c.f)
	}
	assert.Equal(t, "x=30", string(envelope.AppendNumber([]byte("x="), 30)), "appends to dst")
}
