package handler

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Mirror headers (MCP 2026-07-28, SEP-2243): a request repeats its method in
// Mcp-Method, and what it acts on in Mcp-Name, so that load balancers and
// routers can act without reading the body. The gateway decides everything
// from the body; it refuses a request whose headers say something else, or
// a proxy or server behind it that routes on a header would run another
// request than the one the gateway admitted. The specification requires
// this of every intermediary that reads the body.

// codeHeaderMismatch is the JSON-RPC error code MCP 2026-07-28 defines for a
// request whose headers disagree with its body (HeaderMismatch).
const codeHeaderMismatch = -32020

// mirrorOf names the params member a request's Mcp-Name header mirrors ("" when
// its method names nothing), and its value in the body (nil when absent).
// needed: a client of the stateless era must send the header for this
// method.
func mirrorOf(m *jsonrpc.Message) (member string, value []byte, needed bool) {
	switch string(m.Method) {
	case "tools/call", "prompts/get":
		return "params.name", m.Name, true
	case "resources/read":
		return "params.uri", m.URI, true
	case "tasks/get", "tasks/update", "tasks/cancel":
		// The tasks extension (SEP-2663) asks clients for the header; the
		// specification's own list leaves these out, and clients that do
		// not implement tasks do not send it, so it is checked when sent.
		return "params.taskId", m.TaskID, false
	}
	return "", nil, false
}

// mismatchError is a request whose headers disagree with its body, or which
// lacks a header its era requires.
type mismatchError struct {
	msg string
	// id is the request's, echoed in the answer; nil for a notification,
	// null for a batch.
	id json.RawMessage
}

func (e *mismatchError) Error() string { return e.msg }

// checkMirrorHeaders refuses a request whose Mcp-Method or Mcp-Name header
// disagrees with its body, in any era, and one of the stateless era that
// leaves out a header it must send. Each header is given once at most
// (checkSingleInputs). Mcp-Param-{Name} headers mirror tool arguments that
// only the tool's schema names; they are passed on untouched, for the
// server to check.
func checkMirrorHeaders(h http.Header, x *exchange) error {
	method, name := headerValue(h, "Mcp-Method"), headerValue(h, "Mcp-Name")
	required := x.Era.RequiresMirrors()
	if method == "" && name == "" && !required {
		return nil
	}
	if x.Batch || len(x.Messages) != 1 {
		if method == "" && name == "" {
			return nil // batches are not part of the stateless era: the upstream refuses them
		}
		return &mismatchError{msg: "a batch cannot carry Mcp-Method or Mcp-Name headers", id: envelope.NullID}
	}
	m := &x.Messages[0]
	e := &mismatchError{id: m.ID}
	if m.Kind != jsonrpc.Request && m.Kind != jsonrpc.Notification {
		required = false // a response mirrors nothing
	}
	switch {
	case method == "" && required:
		e.msg = fmt.Sprintf("the Mcp-Method header is missing; MCP %s requires it on every request, equal to the body's method %q", feature.StatelessSince, clip(string(m.Method)))
		return e
	case method != "" && method != string(m.Method):
		e.msg = fmt.Sprintf("the Mcp-Method header says %q but the body's method is %q", clip(method), clip(string(m.Method)))
		return e
	}
	member, value, needed := mirrorOf(m)
	switch {
	case name == "" && needed && required:
		e.msg = fmt.Sprintf("the Mcp-Name header is missing; MCP %s requires it on %s, equal to the body's %s", feature.StatelessSince, clip(string(m.Method)), member)
		return e
	case name == "":
		return nil
	case member == "":
		e.msg = fmt.Sprintf("the Mcp-Name header is given, but the body's method %q names nothing it could mirror", clip(string(m.Method)))
		return e
	}
	said, ok := decodeMirror(name)
	switch {
	case !ok:
		e.msg = fmt.Sprintf("the Mcp-Name header %q is marked as base64 but is not valid base64", clip(name))
	case value == nil:
		e.msg = fmt.Sprintf("the Mcp-Name header says %q but the body has no %s", clip(said), member)
	case said != string(value):
		e.msg = fmt.Sprintf("the Mcp-Name header says %q but the body's %s is %q", clip(said), member, clip(string(value)))
	default:
		return nil
	}
	return e
}

// headerValue is the value of the header name as an HTTP/1.1 hop reads it,
// without the spaces and tabs around it: HTTP/2 keeps them, so that a
// proxy behind the gateway would otherwise read another value than the one
// checked.
func headerValue(h http.Header, name string) string {
	return strings.Trim(h.Get(name), " \t")
}

// The markers of a mirrored value sent in base64 (SEP-2243), exact and in
// lower case.
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// decodeMirror is the value a mirror header carries: a value between the
// base64 markers decoded (standard base64, padded), any other as sent. ok
// is false for a value marked as base64 that is not. Clients must encode a
// value that itself looks marked, so a marked value is never read as sent.
func decodeMirror(v string) (_ string, ok bool) {
	inner, marked := strings.CutPrefix(v, base64Prefix)
	if marked {
		inner, marked = strings.CutSuffix(inner, base64Suffix)
	}
	if !marked {
		return v, true
	}
	// Strict: a value has one encoding, so that a router that compares
	// encoded values sees the same name as the gateway.
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// encodeMirror is value as a client writes it in a mirror header: as it
// is when it is visible ASCII, without a space at either end, and not
// marked as base64 itself; otherwise in base64 between the markers.
func encodeMirror(value []byte) string {
	v := string(value)
	plain := v != "" && v[0] != ' ' && v[len(v)-1] != ' ' &&
		!(strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix))
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] <= 0x7e
	}
	if plain {
		return v
	}
	return base64Prefix + base64.StdEncoding.EncodeToString(value) + base64Suffix
}
