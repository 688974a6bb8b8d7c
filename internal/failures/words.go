package failures

import (
	"strconv"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words the model reads when the upstream fails: what happened, what
// to do, and, whenever a delay is known, when to retry.

// Unavailable: the MCP server cannot be reached, or said so (502).
func Unavailable(why string, retry time.Duration) envelope.Envelope {
	message := "The MCP server behind this gateway is unavailable"
	if why != "" {
		message += ": " + why
	}
	secs, in := feature.InSeconds(retry)
	return envelope.New(envelope.HandoffUpstreamUnavailable, message).
		Suggest("Tell the user the tool server is unavailable, and retry in " + in + ".").
		RetryAfter(float64(secs)).
		Envelope()
}

// upstreamTimedOut: the MCP server did not answer in time; the call may
// still complete.
func upstreamTimedOut(why string) envelope.Envelope {
	message := "The MCP server did not answer in time"
	if why != "" {
		message += ": " + why
	}
	return envelope.New(envelope.Timeout, message).
		Suggest("The call may still complete on the server: check its effect before retrying, so that it does not run twice.").
		Envelope()
}

// upstreamBusy: the MCP server answered 503, with a Retry-After if known.
func upstreamBusy(answered string, retry time.Duration, known bool) envelope.Envelope {
	b := envelope.New(envelope.ServerBusy, "The MCP server is busy: "+answered)
	if known {
		secs, in := feature.InSeconds(retry)
		b.Suggest(feature.ReduceConcurrency("in " + in)).RetryAfter(float64(secs))
	} else {
		b.Suggest(feature.ReduceConcurrency("later"))
	}
	return b.Details(envelope.Detail{Key: "upstream_status", Value: "503"}).Envelope()
}

// upstreamRateLimited: the MCP server answered 429, with a Retry-After if
// known.
func upstreamRateLimited(answered string, retry time.Duration, known bool) envelope.Envelope {
	b := envelope.New(envelope.RateLimited, "The MCP server refused the call: too many requests ("+answered+")")
	if known {
		secs, in := feature.InSeconds(retry)
		b.Suggest("Wait " + in + ", then retry the same call.").RetryAfter(float64(secs))
	} else {
		b.Suggest("Wait before retrying the same call; the server did not say how long.")
	}
	return b.Details(envelope.Detail{Key: "upstream_status", Value: "429"}).Envelope()
}

// upstreamFailed: the MCP server answered 500 or another 5xx with a body
// that is not JSON-RPC, of which excerpt is the start.
func upstreamFailed(status int, answered, excerpt string) envelope.Envelope {
	b := envelope.New(envelope.InternalError, "The tool failed inside the MCP server: "+answered).
		Suggest("Do not blindly retry: the same call is likely to fail the same way. Tell the user what failed, or try another approach.").
		Details(envelope.Detail{Key: "upstream_status", Value: strconv.Itoa(status)})
	if excerpt != "" {
		b.Details(envelope.Detail{Key: "upstream_body", Value: excerpt})
	}
	return b.Envelope()
}

// mayHaveRun is what the model is told to do of a call that reached the
// server and broke: it may have run (a payment, an email, a deploy), and
// must not be retried blindly, which severity critical says too.
const mayHaveRun = "The call may have run: check its effect before retrying, so that it does not run twice."

// brokenAfterSent: the call was sent to the MCP server, whose connection
// broke before any answer (the server died, or restarted, in the middle of
// the call, or after it).
func brokenAfterSent() envelope.Envelope {
	return envelope.New(envelope.HandoffUpstreamUnavailable, "The MCP server stopped before answering: the connection to it broke after the call was sent").
		Suggest(mayHaveRun).
		Critical().
		Envelope()
}

// streamBroken: an event stream ended (what says how) before the response
// it owed, and cannot be resumed.
func streamBroken(what string) envelope.Envelope {
	return envelope.New(envelope.HandoffUpstreamUnavailable, "The MCP server did not finish answering: "+what+" before the response to this request").
		Suggest(mayHaveRun).
		Critical().
		Envelope()
}

// Words are the envelopes of the upstream's failures, with an example's
// values, for the golden list of the gateway's words.
func Words() []feature.Word {
	return []feature.Word{
		{Name: "the upstream is unavailable", Envelope: Unavailable("the connection was refused", 30*time.Second)},
		{Name: "the upstream timed out", Envelope: upstreamTimedOut("")},
		{Name: "the upstream is busy", Envelope: upstreamBusy("it answered 503 Service Unavailable", 12*time.Second, true)},
		{Name: "the upstream rate-limited the call", Envelope: upstreamRateLimited("it answered 429 Too Many Requests", 45*time.Second, true)},
		{Name: "the tool failed in the upstream", Envelope: upstreamFailed(500, "it answered 500 Internal Server Error", "KeyError")},
		{Name: "the connection broke after the call was sent", Envelope: brokenAfterSent()},
		{Name: "a broken stream", Envelope: streamBroken("the connection to the MCP server broke")},
	}
}
