package envelope

// Code names what went wrong. The set is closed-then-open: the canonical codes
// below are offered as constants, and any other string is a valid custom code.
type Code string

// The canonical codes of the wire contract.
const (
	MissingDiscriminator       Code = "MISSING_DISCRIMINATOR"
	UnknownAction              Code = "UNKNOWN_ACTION"
	ValidationError            Code = "VALIDATION_ERROR"
	MissingRequiredField       Code = "MISSING_REQUIRED_FIELD"
	InternalError              Code = "INTERNAL_ERROR"
	RateLimited                Code = "RATE_LIMITED"
	Unauthorized               Code = "UNAUTHORIZED"
	Forbidden                  Code = "FORBIDDEN"
	NotFound                   Code = "NOT_FOUND"
	Conflict                   Code = "CONFLICT"
	Timeout                    Code = "TIMEOUT"
	ServerBusy                 Code = "SERVER_BUSY"
	Deprecated                 Code = "DEPRECATED"
	AuthRequired               Code = "AUTH_REQUIRED"
	HandoffUpstreamUnavailable Code = "HANDOFF_UPSTREAM_UNAVAILABLE"
	HandoffNamespaceMismatch   Code = "HANDOFF_NAMESPACE_MISMATCH"
	HandoffConnecting          Code = "HANDOFF_CONNECTING"
)

// CanonicalCodes lists the canonical codes in the order of the contract.
var CanonicalCodes = []Code{
	MissingDiscriminator, UnknownAction, ValidationError, MissingRequiredField,
	InternalError, RateLimited, Unauthorized, Forbidden, NotFound, Conflict,
	Timeout, ServerBusy, Deprecated, AuthRequired, HandoffUpstreamUnavailable,
	HandoffNamespaceMismatch, HandoffConnecting,
}

// Canonical reports whether c is one of the contract's canonical codes.
func (c Code) Canonical() bool {
	for _, k := range CanonicalCodes {
		if c == k {
			return true
		}
	}
	return false
}

// Severity says how a failure should be read.
type Severity string

// The three severities of the contract.
const (
	// SeverityError: the action failed.
	SeverityError Severity = "error"
	// SeverityCritical: it failed and must not be retried blindly.
	SeverityCritical Severity = "critical"
	// SeverityWarning: guidance travelling on the success path; the result is
	// not an error (isError is false).
	SeverityWarning Severity = "warning"
)

// IsError reports the isError flag of a tools/call result carrying an
// envelope of this severity: true for everything but a warning.
func (s Severity) IsError() bool { return s != SeverityWarning }
