package envelope_test

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// toolResponse is a tools/call response as a client decodes it; ID keeps the
// id's bytes.
type toolResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
}

// assertJSONForm checks what every wire form promises: valid JSON, and < and
// > written as themselves, never as \u003c or \u003e.
func assertJSONForm(t *testing.T, b []byte) {
	t.Helper()
	require.True(t, json.Valid(b), "invalid JSON: %s", b)
	assert.NotContains(t, string(b), `\u003c`)
	assert.NotContains(t, string(b), `\u003e`)
	assert.NotContains(t, string(b), `\u0026`)
}

type toolResultCase struct {
	golden string
	id     string
	env    envelope.Envelope
}

var toolResultCases = []toolResultCase{
	{golden: "tool_result_number_id", id: `1`, env: contractExample()},
	{golden: "tool_result_string_id", id: `"req-7"`, env: contractExample()},
	{golden: "tool_result_string_id_with_escapes", id: `"a\"<b>\u00e9"`, env: contractExample()},
	{golden: "tool_result_large_integer_id_is_not_rounded", id: `12345678901234567890123`, env: contractExample()},
	{golden: "tool_result_negative_id", id: `-3`, env: contractExample()},
	{golden: "tool_result_float_id", id: `1.50`, env: contractExample()},
	{golden: "tool_result_warning_is_not_an_error", id: `2`, env: msg(envelope.Deprecated, "Parameter 'limit' is deprecated").Warning().Envelope()},
	{golden: "tool_result_critical_is_an_error", id: `3`, env: msg(envelope.InternalError, "Ledger write failed").Critical().Envelope()},
	{golden: "tool_result_zero_severity_is_an_error", id: `4`, env: envelope.Envelope{Code: envelope.Timeout, Message: "slow"}},
	{golden: "tool_result_control_characters_and_quotes", id: `5`, env: msg(envelope.InternalError, "tab\tquote\"backslash\\nul\x00bell\x07del\x7f").Envelope()},
}

func TestToolResultEchoesTheIDAndCarriesTheEnvelopeText(t *testing.T) {
	for _, c := range toolResultCases {
		t.Run(c.golden, func(t *testing.T) {
			b := c.env.AppendToolResult(nil, json.RawMessage(c.id))
			assertGolden(t, c.golden, b)
			assertJSONForm(t, b)

			var r toolResponse
			require.NoError(t, json.Unmarshal(b, &r))
			assert.Equal(t, "2.0", r.JSONRPC)
			assert.Equal(t, c.id, string(r.ID), "the id keeps its exact bytes")
			require.Len(t, r.Result.Content, 1)
			assert.Equal(t, "text", r.Result.Content[0].Type)
			assert.Equal(t, c.env.Text(), r.Result.Content[0].Text, "the text block decodes to the envelope")
			assert.Equal(t, c.env.Severity != envelope.SeverityWarning, r.Result.IsError)
			assert.Contains(t, string(b), `"text":"<tool_error code=`, "< is written as itself")
		})
	}
}

func TestToolResultIsTheReferenceShape(t *testing.T) {
	e := envelope.Envelope{Code: envelope.Timeout, Message: "slow"}
	want := `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"<tool_error code=\"TIMEOUT\" severity=\"error\">\n<message>slow</message>\n</tool_error>"}],"isError":true}}`
	assert.Equal(t, want, string(e.AppendToolResult(nil, json.RawMessage("9"))))
}

func TestCallToolResultIsTheResultMember(t *testing.T) {
	e := contractExample()
	b := e.AppendCallToolResult(nil)
	assertGolden(t, "call_tool_result", b)
	assertJSONForm(t, b)
	full := e.AppendToolResult(nil, json.RawMessage("1"))
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":`+string(b)+`}`, string(full))
}

func TestWireFormsAppendToDst(t *testing.T) {
	e := contractExample()
	dst := []byte("keep")
	assert.Equal(t, "keep"+string(e.AppendToolResult(nil, json.RawMessage("1"))), string(e.AppendToolResult(dst, json.RawMessage("1"))))
	assert.Equal(t, "keep"+string(e.AppendRPCError(nil, json.RawMessage("1"), envelope.CodeServerError)), string(e.AppendRPCError(dst, json.RawMessage("1"), envelope.CodeServerError)))
	assert.Equal(t, "keep"+string(e.AppendCallToolResult(nil)), string(e.AppendCallToolResult(dst)))
	assert.Equal(t, "keep", string(dst))
}

// rpcError is a JSON-RPC error response; Data holds the raw members so that
// a test can tell an absent member from an empty one.
type rpcError struct {
	JSONRPC string `json:"jsonrpc"`
	Error   struct {
		Code    int                        `json:"code"`
		Message string                     `json:"message"`
		Data    map[string]json.RawMessage `json:"data"`
	} `json:"error"`
}

type rpcErrorCase struct {
	golden string
	id     json.RawMessage
	code   int
	env    envelope.Envelope
}

var rpcErrorCases = []rpcErrorCase{
	{golden: "rpc_error_with_id", id: json.RawMessage(`7`), code: envelope.CodeServerError, env: contractExample()},
	{golden: "rpc_error_with_string_id", id: json.RawMessage(`"abc"`), code: envelope.CodeServerError, env: contractExample()},
	{golden: "rpc_error_without_id", id: nil, code: envelope.CodeServerError,
		env: msg(envelope.RateLimited, "Rate limit exceeded").Suggest("Wait 3 seconds").RetryAfter(3).Envelope()},
	{golden: "rpc_error_null_id_parse_error", id: envelope.NullID, code: envelope.CodeParseError,
		env: msg(envelope.ValidationError, "The body is not JSON").Envelope()},
	{golden: "rpc_error_invalid_request", id: envelope.NullID, code: envelope.CodeInvalidRequest,
		env: msg(envelope.ValidationError, "Not a JSON-RPC message").Envelope()},
	{golden: "rpc_error_omits_absent_recovery_and_retry_after", id: json.RawMessage(`1`), code: envelope.CodeServerError,
		env: msg(envelope.HandoffConnecting, "Connecting to the upstream").Warning().Envelope()},
	{golden: "rpc_error_fractional_retry_after", id: json.RawMessage(`1`), code: envelope.CodeServerError,
		env: msg(envelope.ServerBusy, "Busy: 4 active, 10 queued").RetryAfter(1.5).Envelope()},
	{golden: "rpc_error_zero_severity_is_written_as_error", id: json.RawMessage(`1`), code: envelope.CodeServerError,
		env: envelope.Envelope{Code: envelope.Timeout, Message: "slow"}},
}

func TestRPCErrorEchoesTheIDAndCarriesTheEnvelopeInData(t *testing.T) {
	for _, c := range rpcErrorCases {
		t.Run(c.golden, func(t *testing.T) {
			b := c.env.AppendRPCError(nil, c.id, c.code)
			assertGolden(t, c.golden, b)
			assertJSONForm(t, b)

			var top map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(b, &top))
			if c.id == nil {
				assert.NotContains(t, top, "id", "a nil id leaves the member out")
			} else {
				assert.Equal(t, string(c.id), string(top["id"]), "the id keeps its exact bytes")
			}
			assert.NotContains(t, top, "result")

			var r rpcError
			require.NoError(t, json.Unmarshal(b, &r))
			assert.Equal(t, "2.0", r.JSONRPC)
			assert.Equal(t, c.code, r.Error.Code)
			assert.Equal(t, c.env.Message, r.Error.Message, "message is the envelope's message")

			data := map[string]any{}
			for k, v := range r.Error.Data {
				var x any
				require.NoError(t, json.Unmarshal(v, &x))
				data[k] = x
			}
			want := map[string]any{
				"code":     string(c.env.Code),
				"severity": "error",
				"envelope": c.env.Text(),
			}
			if c.env.Severity != "" {
				want["severity"] = string(c.env.Severity)
			}
			if c.env.Recovery != "" {
				want["recovery"] = c.env.Recovery
			}
			if c.env.HasRetryAfter() {
				want["retryAfter"] = c.env.RetryAfter
			}
			assert.Equal(t, want, data, "data holds exactly the present fields")
		})
	}
}

func TestRPCErrorOmitsAbsentRecoveryAndRetryAfter(t *testing.T) {
	e := envelope.Envelope{Code: envelope.Timeout, Message: "slow"}
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"slow","data":{"code":"TIMEOUT","severity":"error","envelope":"<tool_error code=\"TIMEOUT\" severity=\"error\">\n<message>slow</message>\n</tool_error>"}}}`
	assert.Equal(t, want, string(e.AppendRPCError(nil, json.RawMessage("1"), envelope.CodeServerError)))
}

func TestJSONStringsDecodeAsEncodingJSONWouldWriteThem(t *testing.T) {
	for _, s := range []string{
		"", "plain", `<tool_error> & "quotes" 'single' \backslash`,
		"\x00\x01\x08\x09\x0a\x0b\x0c\x0d\x1f\x20\x7f",
		"naïve 日本語 🚀", "\u2028\u2029",
		"bad \xff byte", "\xc3", "\xed\xa0\x80 surrogate half", "\xf4\x90\x80\x80 above max", "\xe2\x82 truncated",
	} {
		got := envelope.AppendJSONString(nil, s)
		assertJSONForm(t, got)
		var back, want string
		require.NoError(t, json.Unmarshal(got, &back))
		ref, err := json.Marshal(s)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(ref, &want))
		assert.Equal(t, want, back, "%q decodes as encoding/json's encoding does", s)
		assert.Equal(t, string([]rune(s)), back, "%q: each invalid byte becomes one U+FFFD", s)
	}
}

func TestWireFormsAreSafeForConcurrentUse(t *testing.T) {
	envs := []envelope.Envelope{contractExample(), msg(envelope.Timeout, "short").Envelope(), everyTextField(string(bytes.Repeat([]byte("<&x"), 2000)))}
	want := make([]string, len(envs))
	for i := range envs {
		want[i] = string(envs[i].AppendToolResult(nil, json.RawMessage("1")))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := (g + i) % len(envs)
				got := envs[k].AppendToolResult(nil, json.RawMessage("1"))
				if string(got) != want[k] {
					t.Errorf("goroutine %d: envelope %d rendered differently", g, k)
					return
				}
			}
		})
	}
	wg.Wait()
}
