package handler

import (
	"fmt"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/mirror"
)

// The words the model reads: every envelope the gateway writes is made here,
// one constructor per situation, so that their wording can be reviewed, and
// kept consistent, in one place. Each message says what happened; each
// recovery says what to do next; a retry_after is given in whole seconds,
// rounded up, whenever a delay is known.

// noUpstreamRoute: a feature routed a request to an upstream route the
// handler does not have (its configuration is wrong).
func noUpstreamRoute(name string) envelope.Envelope {
	return envelope.New(envelope.InternalError, "This gateway has no upstream route named "+quote(clip(name))+" for the request").
		Suggest("Do not retry: tell the gateway's operator that its configuration routes to an upstream it does not define.").
		Envelope()
}

// Requests the gateway refuses as they are.

// originRefused: a web page from an origin not allowed.
func originRefused(origin string) envelope.Envelope {
	return envelope.New(envelope.Forbidden, "Requests from the web origin "+quote(clip(origin))+" are not allowed by this MCP gateway").
		Suggest("Call the MCP server from an MCP client, or ask its operator to add this origin to allowed_origins.").
		Envelope()
}

// methodRefused: a request under an HTTP method MCP does not use, which
// the gateway does not read, while limits or a policy apply.
func methodRefused(method string) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "HTTP method "+quote(clip(method))+" is not one this MCP endpoint takes: it takes POST, GET and DELETE").
		Suggest("Send JSON-RPC messages with POST.").
		Envelope()
}

func bodyTooLarge(max int64) envelope.Envelope {
	return envelope.New(envelope.ValidationError, fmt.Sprintf("Request body is larger than the %d bytes this server accepts", max)).
		Suggest("Send a smaller request: split the work into several calls, or pass large data by reference.").
		Envelope()
}

func bodyTooSlow(timeout time.Duration) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "Request body did not arrive within "+formatWindow(timeout)).
		Suggest("Send the whole request at once, and retry it on a faster connection or with a smaller body.").
		Envelope()
}

func inputRepeated(e *feature.RepeatError) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "Request is ambiguous: "+e.Error()).
		Suggest("Send " + e.What + " once.").
		Envelope()
}

func bodyEncoded(encodings string) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "Request body is sent with Content-Encoding "+clip(encodings)+": this server reads every request before it runs, and takes them uncompressed only").
		Suggest("Send the request body uncompressed, without a Content-Encoding header.").
		Envelope()
}

// bodyNotJSON: the body is not JSON; when it does not claim to be (its
// Content-Type), the message says why it was read at all.
func bodyNotJSON(err *jsonrpc.SyntaxError, contentType string, claimsJSON bool) envelope.Envelope {
	message := "Request body is not valid JSON: " + err.Error()
	if !claimsJSON {
		message = "Request body is not JSON (Content-Type " + clip(contentType) + "): this server reads every request before it runs, and could not read it: " + err.Error()
	}
	return envelope.New(envelope.ValidationError, message).
		Suggest("Send one JSON-RPC 2.0 message, or a batch array of them, as the POST body, with Content-Type: application/json.").
		Envelope()
}

func messageAmbiguous() envelope.Envelope {
	return envelope.New(envelope.ValidationError,
		"Request is ambiguous: a JSON-RPC member (jsonrpc, method, id, params, result, error, params.name, params.uri, params.taskId) appears twice or in another letter case").
		Suggest("Send each member once, spelled in lower case as JSON-RPC defines it.").
		Envelope()
}

func headersDisagree(e *mirror.Mismatch) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "Request headers disagree with its body: "+e.Msg).
		Suggest("Send the Mcp-Method header equal to the body's method, and Mcp-Name equal to its params.name (tools/call, prompts/get), params.uri (resources/read) or params.taskId (tasks/get, tasks/update, tasks/cancel); a value that is not plain ASCII goes as =?base64?...?=.").
		Envelope()
}

func batchTooLarge(max int) envelope.Envelope {
	return envelope.New(envelope.ValidationError, fmt.Sprintf("Request is a batch of more than %d messages, the most this server takes in one request", max)).
		Suggest(fmt.Sprintf("Send at most %d messages per batch, or send them one at a time.", max)).
		Envelope()
}

func messageRefused(e *messageError) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "Request refused: "+e.msg).Suggest(e.recovery).Envelope()
}

// What messageRefused says of a message beyond the bounds checkMessages
// keeps: an id, a method, a name.

func idTooLong(n int) *messageError {
	return &messageError{badID: true,
		msg:      fmt.Sprintf("an id is %d bytes long; this server takes ids of at most %d", n, maxIDBytes),
		recovery: fmt.Sprintf("Use a string or a number of at most %d characters as the id.", maxIDBytes)}
}

func idNotScalar(id []byte) *messageError {
	return &messageError{badID: true,
		msg:      "an id is " + string(id) + ", which is not a string or a number",
		recovery: fmt.Sprintf("Use a string or a number of at most %d characters as the id.", maxIDBytes)}
}

func methodTooLong(n int) *messageError {
	return &messageError{
		msg:      fmt.Sprintf("a method name is %d bytes long; this server takes method names of at most %d", n, maxMethod),
		recovery: "Use a method the MCP specification or the server defines."}
}

func toolNameTooLong(n int) *messageError {
	return &messageError{
		msg:      fmt.Sprintf("a tool name is %d characters long; MCP tool names have at most %d", n, maxName),
		recovery: "Call a tool by the exact name tools/list gives."}
}

func nameTooLong(n int) *messageError {
	return &messageError{
		msg:      fmt.Sprintf("a name (params.name) is %d characters long; this server takes names of at most %d", n, maxName),
		recovery: "Use a name exactly as the server lists it (tools/list, prompts/list)."}
}

// formatWindow writes a duration the way a person would (feature.Window).
var formatWindow = feature.Window

func quote(s string) string { return `"` + s + `"` }

// maxEchoed bounds a client-chosen value echoed in a log line or an
// envelope; clip cuts one to it.
const maxEchoed = feature.MaxEchoed

var clip = feature.Clip
