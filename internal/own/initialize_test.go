package own

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The answer to the gateway's own initialize is read as clients read
// answers: JSON, or the data of a stream's events by the one reader of
// event streams, whatever its line breaks; only the result of that
// initialize counts.
func TestTheAnswerToTheGatewaysInitializeIsReadAsClientsReadIt(t *testing.T) {
	const result = `{"jsonrpc":"2.0","id":"caddy-mcp-reopen","result":{"protocolVersion":"2025-06-18"}}`
	stream := func(body string) *ownAnswer {
		return &ownAnswer{status: 200, header: http.Header{"Content-Type": {"text/event-stream"}}, body: []byte(body)}
	}
	for name, tt := range map[string]struct {
		answer *ownAnswer
		ok     bool
	}{
		"JSON":                     {&ownAnswer{status: 200, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(result)}, true},
		"an event":                 {stream("event: message\ndata: " + result + "\n\n"), true},
		"an event in CRLF lines":   {stream("event: message\r\ndata: " + result + "\r\n\r\n"), true},
		"after a byte order mark":  {stream("\xef\xbb\xbfdata: " + result + "\n\n"), true},
		"its data on two lines":    {stream("data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":\"caddy-mcp-reopen\",\"result\":{}}\n\n"), true},
		"after a notification":     {stream("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\ndata: " + result + "\n\n"), true},
		"an event never ended":     {stream("data: " + result + "\n"), false},
		"an error":                 {stream(`data: {"jsonrpc":"2.0","id":"caddy-mcp-reopen","error":{"code":-32600,"message":"no"}}` + "\n\n"), false},
		"another request's result": {stream(`data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n"), false},
		"a result given twice":     {stream(`data: {"jsonrpc":"2.0","id":"caddy-mcp-reopen","result":{},"result":{}}` + "\n\n"), false},
		"a comment, not data":      {stream(": " + result + "\n\n"), false},
		"JSON answered with a 404": {&ownAnswer{status: 404, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(result)}, false},
	} {
		err := tt.answer.initialized()
		assert.Equal(t, tt.ok, err == nil, "%s: %v", name, err)
	}
}
