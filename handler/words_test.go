package handler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/mirror"
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
		{Name: "an input given twice", Env: inputRepeated(&feature.RepeatError{What: "the Mcp-Session-Id header", Count: 2}), Want: envelope.Envelope{
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
		{Name: "headers that disagree with the body", Env: headersDisagree(&mirror.Mismatch{Msg: `the Mcp-Method header says "a" but the body's method is "b"`}), Want: envelope.Envelope{
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
