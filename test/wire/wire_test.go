package wire

import (
	"encoding/json"
	"testing"

	"github.com/caddymcp/caddy-mcp/envelope"
)

func TestBuilders(t *testing.T) {
	for got, want := range map[string]string{
		ToolCall("a-1", "echo"): `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"echo","arguments":{}}}`,
		NumberedCall(3, "slow"): `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}`,
		Batch(4, 2, "a"):        `[{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a"}},{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a"}}]`,
		ProgressCall("held"):    `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"held","arguments":{},"_meta":{"progressToken":"p"}}}`,
	} {
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("not JSON: %s", got)
		}
	}
	if n := len(ToolsCallOfSize(4096)); n != 4096 {
		t.Errorf("ToolsCallOfSize(4096) is %d bytes", n)
	}
}

// answer is a response whose result is a CallToolResult of one text.
func answer(text string, isError bool) []byte {
	res, _ := json.Marshal(map[string]any{
		"content": []map[string]any{{"type": "text", "text": text}},
		"isError": isError,
	})
	return []byte(`{"jsonrpc":"2.0","id":1,"result":` + string(res) + `}`)
}

func TestOutcome(t *testing.T) {
	busy := envelope.New(envelope.ServerBusy, "Server busy").Suggest("Retry later.").Envelope()
	rpcError := []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":{"code":"RATE_LIMITED"}}}`)
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{answer("ran echo", false), "done"},
		{answer(busy.Text(), true), "SERVER_BUSY"},
		{rpcError, "RATE_LIMITED"},
		{answer("the tool failed", true), "isError: the tool failed"},
	} {
		if got := Outcome(tc.body); got != tc.want {
			t.Errorf("Outcome(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
	// Anything else is described, with the body.
	for body, prefix := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                           "unexpected: ",
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`: "JSON-RPC error without a code: ",
		`not json`: "not JSON: ",
	} {
		if got := Outcome([]byte(body)); got != prefix+body {
			t.Errorf("Outcome(%s) = %q, want %q", body, got, prefix+body)
		}
	}
}

func TestEnvelopeReaders(t *testing.T) {
	busy := envelope.New(envelope.ServerBusy, "Server busy").Suggest("Retry later.").Envelope()
	inResult := answer(busy.Text(), true)
	data, _ := json.Marshal(busy.Text())
	inError := []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Server busy","data":{"envelope":` + string(data) + `}}}`)

	if env, err := ResultEnvelope(inResult); err != nil || env.Code != envelope.ServerBusy {
		t.Errorf("ResultEnvelope: %v, %v", env.Code, err)
	}
	if _, err := ResultEnvelope(inError); err == nil {
		t.Error("ResultEnvelope of an error answer: no error")
	}
	if env, err := ErrorEnvelope(inError); err != nil || env.Code != envelope.ServerBusy {
		t.Errorf("ErrorEnvelope: %v, %v", env.Code, err)
	}
	if _, err := ErrorEnvelope(inResult); err == nil {
		t.Error("ErrorEnvelope of a result: no error")
	}
	for _, body := range [][]byte{inResult, inError} {
		if text, err := EnvelopeText(body); err != nil || text != busy.Text() {
			t.Errorf("EnvelopeText(%s) = %q, %v", body, text, err)
		}
	}
	if text, err := EnvelopeText(answer("ran", false)); err != nil || text != "" {
		t.Errorf("EnvelopeText of a plain result = %q, %v", text, err)
	}
	if _, err := EnvelopeText([]byte("[")); err == nil {
		t.Error("EnvelopeText of no JSON: no error")
	}

	r, err := Read(inError)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Members["id"]; !ok || string(r.ID) != "null" || r.Error == nil {
		t.Errorf("Read: %+v", r)
	}
	answers, err := Answers([]byte(`[` + string(inResult) + `,` + string(inError) + `]`))
	if err != nil || len(answers) != 2 || Outcome(answers[0]) != "SERVER_BUSY" {
		t.Errorf("Answers: %d, %v", len(answers), err)
	}
	if text, ok := ResultText(json.RawMessage(`{"content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]}`)); !ok || text != "ab" {
		t.Errorf("ResultText = %q, %v", text, ok)
	}
}
