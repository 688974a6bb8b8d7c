package handler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/keys"
)

// coreWords are the envelopes the core writes, built with an example's
// values.
func coreWords(t *testing.T) []featuretest.WordCase {
	syntax := func() *jsonrpc.SyntaxError {
		_, _, err := jsonrpc.Parse([]byte(`{"id":1,`), nil, 1)
		var s *jsonrpc.SyntaxError
		require.ErrorAs(t, err, &s)
		return s
	}()
	return []featuretest.WordCase{
		{Name: "the upstream is unavailable", Env: upstreamUnavailable("the connection was refused", 30*time.Second), Want: envelope.Envelope{
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
		{Name: "a broken stream", Env: streamBroken("the connection to the MCP server broke", 30*time.Second), Want: envelope.Envelope{
			Code: envelope.HandoffUpstreamUnavailable, Severity: envelope.SeverityError,
			Message:    "The MCP server did not finish answering: the connection to the MCP server broke before the response to this request",
			Recovery:   "The call may have run: check its effect before retrying, so that it does not run twice.",
			RetryAfter: 30,
		}},
		{Name: "a foreign origin", Env: originRefused("http://evil.example.com"), Want: envelope.Envelope{
			Code: envelope.Forbidden, Severity: envelope.SeverityError,
			Message:  `Requests from the web origin "http://evil.example.com" are not allowed by this MCP gateway`,
			Recovery: "Call the MCP server from an MCP client, or ask its operator to add this origin to allowed_origins.",
		}},
		{Name: "a body too large", Env: bodyTooLarge(4 << 20), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request body is larger than the 4194304 bytes this server accepts",
			Recovery: "Send a smaller request: split the work into several calls, or pass large data by reference.",
		}},
		{Name: "a body too slow", Env: bodyTooSlow(10 * time.Second), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request body did not arrive within 10s",
			Recovery: "Send the whole request at once, and retry it on a faster connection or with a smaller body.",
		}},
		{Name: "an input given twice", Env: inputRepeated(&keys.RepeatError{What: "the Mcp-Session-Id header", Count: 2}), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request is ambiguous: the Mcp-Session-Id header is given 2 times",
			Recovery: "Send the Mcp-Session-Id header once.",
		}},
		{Name: "a compressed body", Env: bodyEncoded("gzip, br"), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request body is sent with Content-Encoding gzip, br: this server reads every request before it runs, and takes them uncompressed only",
			Recovery: "Send the request body uncompressed, without a Content-Encoding header.",
		}},
		{Name: "a body claiming JSON that is not", Env: bodyNotJSON(syntax, "application/json", true), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request body is not valid JSON: " + syntax.Error(),
			Recovery: "Send one JSON-RPC 2.0 message, or a batch array of them, as the POST body, with Content-Type: application/json.",
		}},
		{Name: "a body not claiming JSON", Env: bodyNotJSON(syntax, "text/plain", false), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request body is not JSON (Content-Type text/plain): this server reads every request before it runs, and could not read it: " + syntax.Error(),
			Recovery: "Send one JSON-RPC 2.0 message, or a batch array of them, as the POST body, with Content-Type: application/json.",
		}},
		{Name: "an ambiguous message", Env: messageAmbiguous(), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request is ambiguous: a JSON-RPC member (jsonrpc, method, id, params, result, error, params.name, params.uri, params.taskId) appears twice or in another letter case",
			Recovery: "Send each member once, spelled in lower case as JSON-RPC defines it.",
		}},
		{Name: "headers that disagree with the body", Env: headersDisagree(&mismatchError{msg: `the Mcp-Method header says "a" but the body's method is "b"`}), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  `Request headers disagree with its body: the Mcp-Method header says "a" but the body's method is "b"`,
			Recovery: "Send the Mcp-Method header equal to the body's method, and Mcp-Name equal to its params.name (tools/call, prompts/get), params.uri (resources/read) or params.taskId (tasks/get, tasks/update, tasks/cancel); a value that is not plain ASCII goes as =?base64?...?=.",
		}},
		{Name: "a batch too large", Env: batchTooLarge(16), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request is a batch of more than 16 messages, the most this server takes in one request",
			Recovery: "Send at most 16 messages per batch, or send them one at a time.",
		}},
		{Name: "a message refused", Env: messageRefused(&messageError{msg: "an id is 300 bytes long", recovery: "Use a short id."}), Want: envelope.Envelope{
			Code: envelope.ValidationError, Severity: envelope.SeverityError,
			Message:  "Request refused: an id is 300 bytes long",
			Recovery: "Use a short id.",
		}},
	}
}

func TestEveryEnvelopeSaysWhatHappenedAndWhatToDo(t *testing.T) {
	featuretest.Words(t, coreWords(t))
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
	down := upstreamUnavailable("", 0)
	assert.Equal(t, "The MCP server behind this gateway is unavailable", down.Message)
	assert.Equal(t, 1.0, down.RetryAfter, "a delay is at least a second")
}

func TestOriginInTheMessageIsClipped(t *testing.T) {
	env := originRefused("http://" + strings.Repeat("a", 300) + ".example")
	assert.Contains(t, env.Message, "... (315 bytes)")
	assert.Less(t, len(env.Message), 400)
}

func TestClipCutsLongValuesAtACharacterBoundary(t *testing.T) {
	exact := strings.Repeat("a", maxEchoed)
	tests := []struct {
		name, in, want string
	}{
		{"short", "tools/call", "tools/call"},
		{"empty", "", ""},
		{"exactly the bound", exact, exact},
		{"one byte over", exact + "b", exact + "... (257 bytes)"},
		{"a rune across the bound", strings.Repeat("a", maxEchoed-1) + "é" + "z", strings.Repeat("a", maxEchoed-1) + "... (258 bytes)"},
		{"runes all along", strings.Repeat("é", 200), strings.Repeat("é", 128) + "... (400 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, clip(tt.in))
		})
	}
}
