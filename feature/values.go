package feature

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Replacer expands the placeholders of a template ({http.request.host},
// {http.vars.client_ip}, …) for one request: Caddy's request replacer is
// one.
type Replacer interface {
	ReplaceAll(input, empty string) string
}

// Authorization is the name of the value of the Authorization header as
// servers read it ({http.mcp.authorization}): "Bearer secret", "BEARER
// secret" and "bearer\tsecret" are one token to the SDK servers, and so
// one value.
const Authorization = "authorization"

// Value is the {http.mcp.<name>} placeholder of message m of x: what a log
// field, a matcher or a key template reads of it. Values a client chose
// in a header are cut to MaxEchoed bytes. ok is false for a name the
// exchange has no value for.
func (x *Exchange) Value(name string, m *jsonrpc.Message) (v string, ok bool) {
	switch name {
	case "method":
		return string(m.Method), true
	case "tool":
		return string(m.Name), true
	case "id":
		return IDText(m.ID), true
	case "batch_size":
		if !x.Batch {
			return "", true
		}
		return strconv.Itoa(len(x.Messages)), true
	case "session_id":
		if x.Era == StatelessEra {
			return "", true // no sessions: a header a client sends names none
		}
		return Clip(x.Request.Header.Get("Mcp-Session-Id")), true
	case "protocol_version":
		return Clip(x.Request.Header.Get("Mcp-Protocol-Version")), true
	case Authorization:
		return NormalizedAuthorization(x.Request.Header.Get("Authorization")), true
	}
	return x.principalValue(name)
}

// IDText is an id as a log reads it: a string id without its quotes, a
// number as written, "" when absent.
func IDText(id json.RawMessage) string {
	if len(id) == 0 || id[0] != '"' {
		return string(id)
	}
	if bytes.IndexByte(id, '\\') < 0 {
		return string(id[1 : len(id)-1])
	}
	var s string
	if json.Unmarshal(id, &s) != nil {
		return string(id)
	}
	return s
}
