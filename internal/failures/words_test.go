package failures

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

func TestEveryEnvelopeOfAFailureSaysWhatHappenedAndWhatToDo(t *testing.T) {
	featuretest.Words(t, []featuretest.WordCase{
		{Name: "the upstream is unavailable", Env: Unavailable("the connection was refused", 30*time.Second), Want: envelope.Envelope{
			Code: envelope.HandoffUpstreamUnavailable, Severity: envelope.SeverityError,
			Message:    "The MCP server behind this gateway is unavailable: the connection was refused",
			Recovery:   "Tell the user the tool server is unavailable, and retry in 30 seconds.",
			RetryAfter: 30,
		}},
		{Name: "the upstream timed out", Env: upstreamTimedOut(""), Want: envelope.Envelope{
			Code: envelope.Timeout, Severity: envelope.SeverityError,
			Message:  "The MCP server did not answer in time",
			Recovery: "The call may still complete on the server: check its effect before retrying, so that it does not run twice.",
		}},
		{Name: "the upstream is busy", Env: upstreamBusy("it answered 503 Service Unavailable", 12*time.Second, true), Want: envelope.Envelope{
			Code: envelope.ServerBusy, Severity: envelope.SeverityError,
			Message:    "The MCP server is busy: it answered 503 Service Unavailable",
			Recovery:   "Reduce concurrent calls: send them one at a time, and retry this one in 12 seconds.",
			Details:    []envelope.Detail{{Key: "upstream_status", Value: "503"}},
			RetryAfter: 12,
		}},
		{Name: "the upstream rate-limited the call", Env: upstreamRateLimited("it answered 429 Too Many Requests", 45*time.Second, true), Want: envelope.Envelope{
			Code: envelope.RateLimited, Severity: envelope.SeverityError,
			Message:    "The MCP server refused the call: too many requests (it answered 429 Too Many Requests)",
			Recovery:   "Wait 45 seconds, then retry the same call.",
			Details:    []envelope.Detail{{Key: "upstream_status", Value: "429"}},
			RetryAfter: 45,
		}},
		{Name: "the tool failed in the upstream", Env: upstreamFailed(500, "it answered 500 Internal Server Error", "KeyError"), Want: envelope.Envelope{
			Code: envelope.InternalError, Severity: envelope.SeverityError,
			Message:  "The tool failed inside the MCP server: it answered 500 Internal Server Error",
			Recovery: "Do not blindly retry: the same call is likely to fail the same way. Tell the user what failed, or try another approach.",
			Details:  []envelope.Detail{{Key: "upstream_status", Value: "500"}, {Key: "upstream_body", Value: "KeyError"}},
		}},
		{Name: "the connection broke after the call was sent", Env: brokenAfterSent(), Want: envelope.Envelope{
			Code: envelope.HandoffUpstreamUnavailable, Severity: envelope.SeverityCritical,
			Message:  "The MCP server stopped before answering: the connection to it broke after the call was sent",
			Recovery: "The call may have run: check its effect before retrying, so that it does not run twice.",
		}},
		{Name: "a broken stream", Env: streamBroken("the connection to the MCP server broke"), Want: envelope.Envelope{
			Code: envelope.HandoffUpstreamUnavailable, Severity: envelope.SeverityCritical,
			Message:  "The MCP server did not finish answering: the connection to the MCP server broke before the response to this request",
			Recovery: "The call may have run: check its effect before retrying, so that it does not run twice.",
		}},
	})
}

func TestUpstreamWordsWithoutAKnownDelay(t *testing.T) {
	busyEnv := upstreamBusy("it answered 503 Service Unavailable", 0, false)
	assert.Equal(t, "Reduce concurrent calls: send them one at a time, and retry this one later.", busyEnv.Recovery)
	assert.False(t, busyEnv.HasRetryAfter())
	limited := upstreamRateLimited("it answered 429 Too Many Requests", 0, false)
	assert.Equal(t, "Wait before retrying the same call; the server did not say how long.", limited.Recovery)
	assert.False(t, limited.HasRetryAfter())
	failed := upstreamFailed(502, "it answered 502 Bad Gateway", "")
	assert.Equal(t, []envelope.Detail{{Key: "upstream_status", Value: "502"}}, failed.Details, "no excerpt, no detail")
	down := Unavailable("", 0)
	assert.Equal(t, "The MCP server behind this gateway is unavailable", down.Message)
	assert.Equal(t, 1.0, down.RetryAfter, "a delay is at least a second")
}
