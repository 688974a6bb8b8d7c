package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// Reply is one JSON-RPC response as a client reads it, the id's bytes kept
// as sent.
type Reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *Error          `json:"error"`
	// Members are the top-level members, to tell an absent id from a null
	// one.
	Members map[string]json.RawMessage `json:"-"`
}

// Error is a JSON-RPC error object, with the data the gateway gives its
// envelopes.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Code       string   `json:"code"`
		Severity   string   `json:"severity"`
		Recovery   string   `json:"recovery"`
		RetryAfter *float64 `json:"retryAfter"`
		Envelope   string   `json:"envelope"`
	} `json:"data"`
}

// Read decodes one JSON-RPC response.
func Read(body []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(body, &r); err != nil {
		return Reply{}, fmt.Errorf("not a JSON-RPC message: %w", err)
	}
	if err := json.Unmarshal(body, &r.Members); err != nil {
		return Reply{}, fmt.Errorf("not a JSON-RPC message: %w", err)
	}
	return r, nil
}

// Answers splits the answer to a batch into its responses.
func Answers(body []byte) ([]json.RawMessage, error) {
	var answers []json.RawMessage
	if err := json.Unmarshal(body, &answers); err != nil {
		return nil, fmt.Errorf("not a batch answer: %w", err)
	}
	return answers, nil
}

// ResultEnvelope is the envelope in the result of a response: what the
// gateway answers a tools/call with when it does not forward it.
func ResultEnvelope(body []byte) (envelope.Parsed, error) {
	r, err := Read(body)
	if err != nil {
		return envelope.Parsed{}, err
	}
	if len(r.Result) == 0 {
		return envelope.Parsed{}, errors.New("the response has no result")
	}
	return envelope.ParseResult(r.Result)
}

// ErrorEnvelope is the envelope in a JSON-RPC error's data: what the gateway
// answers any other request with when it does not forward it.
func ErrorEnvelope(body []byte) (envelope.Parsed, error) {
	r, err := Read(body)
	if err != nil {
		return envelope.Parsed{}, err
	}
	if r.Error == nil {
		return envelope.Parsed{}, errors.New("the response is no JSON-RPC error")
	}
	return envelope.Parse(r.Error.Data.Envelope)
}

// EnvelopeText is the text of the envelope a response carries: a JSON-RPC
// error's data.envelope, or the envelope in a result; "" when it carries
// none. The error says the body is no JSON-RPC response.
func EnvelopeText(body []byte) (string, error) {
	r, err := Read(body)
	if err != nil {
		return "", err
	}
	if r.Error != nil {
		return r.Error.Data.Envelope, nil
	}
	env, err := envelope.ParseResult(r.Result)
	if err != nil {
		return "", nil
	}
	return env.Raw, nil
}

// callToolResult is what the readers look at in a CallToolResult.
type callToolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

// ResultText is the text of a CallToolResult: its text contents, one after
// the other. ok is false when result is no CallToolResult.
func ResultText(result json.RawMessage) (text string, ok bool) {
	var res callToolResult
	if json.Unmarshal(result, &res) != nil {
		return "", false
	}
	var b strings.Builder
	for _, c := range res.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String(), true
}

// Outcome is what the response to one tools/call came back with: "done"
// for the upstream's result, the code of an envelope (in a result or in a
// JSON-RPC error), or, for anything else, a description that no test
// expects, holding the body. It needs no *testing.T, for goroutines.
func Outcome(body []byte) string {
	r, err := Read(body)
	if err != nil {
		return "not JSON: " + string(body)
	}
	if r.Error != nil {
		if r.Error.Data.Code == "" {
			return "JSON-RPC error without a code: " + string(body)
		}
		return r.Error.Data.Code
	}
	var res callToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) == 0 {
		return "unexpected: " + string(body)
	}
	if !res.IsError {
		return "done"
	}
	if env, err := envelope.ParseResult(r.Result); err == nil {
		return string(env.Code)
	}
	return "isError: " + res.Content[0].Text
}
