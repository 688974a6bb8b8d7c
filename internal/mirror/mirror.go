// Package mirror checks the headers of MCP 2026-07-28 (SEP-2243) that
// repeat what a request's body says, Mcp-Method and Mcp-Name, for routers
// that do not read the body. The gateway decides from the body, so it
// refuses a request whose headers say something else, as the
// specification requires of every intermediary that reads the body: a hop
// behind it that routes on a header would otherwise run another request
// than the one admitted.
package mirror

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

// Code is the JSON-RPC error code MCP 2026-07-28 defines for a request
// whose headers disagree with its body (HeaderMismatch).
const Code = -32020

// Of names the params member a request's Mcp-Name header mirrors ("" when
// its method names nothing), and its value in the body (nil when absent).
// needed: a client of the stateless era must send the header for this
// method.
func Of(m *jsonrpc.Message) (member string, value []byte, needed bool) {
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

// Mismatch is a request whose headers disagree with its body, or which
// lacks a header its era requires.
type Mismatch struct {
	// Msg says what disagrees, with the values the client chose cut to
	// feature.MaxEchoed bytes.
	Msg string
	// ID is the request's, echoed in the answer; nil for a notification,
	// null for a batch.
	ID json.RawMessage
}

func (e *Mismatch) Error() string { return e.Msg }

// Check refuses, with a *Mismatch, a request of era whose Mcp-Method or
// Mcp-Name header in h disagrees with its messages msgs (a batch when
// batch), in any era, and one of the stateless era that leaves out a
// header it must send. The caller has refused a header given more than
// once. Mcp-Param-{Name} headers mirror tool arguments that only the
// tool's schema names; they are passed on untouched, for the server to
// check.
func Check(h http.Header, msgs []jsonrpc.Message, batch bool, era feature.Era) error {
	method, name := headerValue(h, "Mcp-Method"), headerValue(h, "Mcp-Name")
	required := era.RequiresMirrors()
	if method == "" && name == "" && !required {
		return nil
	}
	if batch || len(msgs) != 1 {
		if method == "" && name == "" {
			return nil // batches are not part of the stateless era: the upstream refuses them
		}
		return &Mismatch{Msg: "a batch cannot carry Mcp-Method or Mcp-Name headers", ID: envelope.NullID}
	}
	m := &msgs[0]
	e := &Mismatch{ID: m.ID}
	if m.Kind != jsonrpc.Request && m.Kind != jsonrpc.Notification {
		required = false // a response mirrors nothing
	}
	switch {
	case method == "" && required:
		e.Msg = fmt.Sprintf("the Mcp-Method header is missing; MCP %s requires it on every request, equal to the body's method %q", feature.StatelessSince, feature.Clip(string(m.Method)))
		return e
	case method != "" && method != string(m.Method):
		e.Msg = fmt.Sprintf("the Mcp-Method header says %q but the body's method is %q", feature.Clip(method), feature.Clip(string(m.Method)))
		return e
	}
	member, value, needed := Of(m)
	switch {
	case name == "" && needed && required:
		e.Msg = fmt.Sprintf("the Mcp-Name header is missing; MCP %s requires it on %s, equal to the body's %s", feature.StatelessSince, feature.Clip(string(m.Method)), member)
		return e
	case name == "":
		return nil
	case member == "":
		e.Msg = fmt.Sprintf("the Mcp-Name header is given, but the body's method %q names nothing it could mirror", feature.Clip(string(m.Method)))
		return e
	}
	said, ok := decode(name)
	switch {
	case !ok:
		e.Msg = fmt.Sprintf("the Mcp-Name header %q is marked as base64 but is not valid base64", feature.Clip(name))
	case value == nil:
		e.Msg = fmt.Sprintf("the Mcp-Name header says %q but the body has no %s", feature.Clip(said), member)
	case said != string(value):
		e.Msg = fmt.Sprintf("the Mcp-Name header says %q but the body's %s is %q", feature.Clip(said), member, feature.Clip(string(value)))
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

// decode is the value a mirror header carries: a value between the
// base64 markers decoded (standard base64, padded), any other as sent. ok
// is false for a value marked as base64 that is not. Clients must encode a
// value that itself looks marked, so a marked value is never read as sent.
func decode(v string) (_ string, ok bool) {
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

// Encode is value as a client writes it in a mirror header: as it
// is when it is visible ASCII, without a space at either end, and not
// marked as base64 itself; otherwise in base64 between the markers.
func Encode(value []byte) string {
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
