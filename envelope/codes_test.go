package envelope_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
)

func TestCanonicalCodesAreTheContractsInOrder(t *testing.T) {
	contract := []string{
		"MISSING_DISCRIMINATOR", "UNKNOWN_ACTION", "VALIDATION_ERROR",
		"MISSING_REQUIRED_FIELD", "INTERNAL_ERROR", "RATE_LIMITED", "UNAUTHORIZED", "FORBIDDEN",
		"NOT_FOUND", "CONFLICT", "TIMEOUT", "SERVER_BUSY", "DEPRECATED", "AUTH_REQUIRED",
		"HANDOFF_UPSTREAM_UNAVAILABLE", "HANDOFF_NAMESPACE_MISMATCH", "HANDOFF_CONNECTING",
	}
	constants := []envelope.Code{
		envelope.MissingDiscriminator, envelope.UnknownAction, envelope.ValidationError,
		envelope.MissingRequiredField, envelope.InternalError, envelope.RateLimited,
		envelope.Unauthorized, envelope.Forbidden, envelope.NotFound, envelope.Conflict,
		envelope.Timeout, envelope.ServerBusy, envelope.Deprecated, envelope.AuthRequired,
		envelope.HandoffUpstreamUnavailable, envelope.HandoffNamespaceMismatch, envelope.HandoffConnecting,
	}
	require.Len(t, constants, 17)
	require.Len(t, envelope.CanonicalCodes, 17)
	for i, want := range contract {
		assert.Equal(t, want, string(constants[i]), "constant %d", i)
		assert.Equal(t, want, string(envelope.CanonicalCodes[i]), "CanonicalCodes[%d]", i)
		assert.True(t, constants[i].Canonical(), want)
	}
}

func TestCustomCodeIsAcceptedAndRoundTrips(t *testing.T) {
	code := envelope.Code("BILLING_FROZEN")
	assert.False(t, code.Canonical())
	assert.False(t, envelope.Code("not_found").Canonical(), "codes are case-sensitive")
	assert.False(t, envelope.Code("").Canonical())

	e := envelope.New(code, "Billing is frozen for this account").Envelope()
	text := e.Text()
	assert.Contains(t, text, `<tool_error code="BILLING_FROZEN" severity="error">`)
	p, err := envelope.Parse(text)
	require.NoError(t, err)
	assert.Equal(t, code, p.Code)
	assert.Equal(t, e, p.Envelope)
}

func TestSeverityIsErrorFollowsTheContractTable(t *testing.T) {
	for _, c := range []struct {
		severity envelope.Severity
		isError  bool
	}{
		{envelope.SeverityError, true},
		{envelope.SeverityCritical, true},
		{envelope.SeverityWarning, false},
	} {
		assert.Equal(t, c.isError, c.severity.IsError(), c.severity)
		e := envelope.Envelope{Severity: c.severity}
		assert.Equal(t, c.isError, e.IsError(), c.severity)
	}
	assert.Equal(t, "error", string(envelope.SeverityError))
	assert.Equal(t, "critical", string(envelope.SeverityCritical))
	assert.Equal(t, "warning", string(envelope.SeverityWarning))

	zero := envelope.Envelope{}
	assert.True(t, zero.IsError(), "the zero severity is error")
}
