package handler

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/keys"
)

// The words the model reads: every envelope the gateway writes is made here,
// one constructor per situation, so that their wording can be reviewed, and
// kept consistent, in one place. Each message says what happened; each
// recovery says what to do next; a retry_after is given in whole seconds,
// rounded up, whenever a delay is known.

// The upstream.

// upstreamUnavailable: the MCP server cannot be reached, or said so (502).
func upstreamUnavailable(why string, retry time.Duration) envelope.Envelope {
	message := "The MCP server behind this gateway is unavailable"
	if why != "" {
		message += ": " + why
	}
	secs, in := inSeconds(retry)
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
		secs, in := inSeconds(retry)
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
		secs, in := inSeconds(retry)
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

// streamBroken: an event stream ended (what says how) before the response
// it owed, and cannot be resumed.
func streamBroken(what string, retry time.Duration) envelope.Envelope {
	secs, _ := inSeconds(retry)
	return envelope.New(envelope.HandoffUpstreamUnavailable, "The MCP server did not finish answering: "+what+" before the response to this request").
		Suggest("The call may have run: check its effect before retrying, so that it does not run twice.").
		RetryAfter(float64(secs)).
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

func inputRepeated(e *keys.RepeatError) envelope.Envelope {
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

func headersDisagree(e *mismatchError) envelope.Envelope {
	return envelope.New(envelope.ValidationError, "Request headers disagree with its body: "+e.msg).
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

// Writing numbers and values the way a person would (package feature).
var (
	inSeconds    = feature.InSeconds
	countOf      = feature.CountOf
	formatWindow = feature.Window
)

func quote(s string) string { return `"` + s + `"` }

// maxEchoed bounds a client-chosen value echoed in a log line or an
// envelope; clip cuts one to it.
const maxEchoed = feature.MaxEchoed

var clip = feature.Clip
