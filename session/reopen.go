package session

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// A stateful server that restarts loses its sessions, and answers 404 to
// their ids; no official client opens a new session then. A token carries
// the params of the client's initialize, so that the session can be opened
// anew on the same upstream for the client.

// maxInit bounds the initialize params a token carries, compacted: a
// client's are a few hundred bytes, and the token travels on every
// request. A session opened with larger ones is not reopened.
const maxInit = 2 << 10

// maxInitRead bounds the params compacted to find whether they fit in
// maxInit: whitespace may make them longer as sent, not four times.
const maxInitRead = 4 * maxInit

// initializeParams are the params of x's request, compacted, when it is
// one initialize request (not in a batch) whose params are a JSON object
// of at most maxInit bytes; nil otherwise.
func initializeParams(x *feature.Exchange) []byte {
	m := x.Single()
	if m == nil || m.Kind != jsonrpc.Request || string(m.Method) != "initialize" || x.Body == nil {
		return nil
	}
	var raw []byte
	err := jsonrpc.Members(x.Body, func(member jsonrpc.Member) bool {
		if string(member.Key) != "params" {
			return true
		}
		raw = x.Body[member.Start:member.End]
		return false
	})
	if err != nil || len(raw) == 0 || raw[0] != '{' || len(raw) > maxInitRead {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.Len() > maxInit {
		return nil
	}
	return b.Bytes()
}

// answeredBy is the upstream a request went to: the one the selection
// policy mcp_session chose (SelectedVar in ctx), or when another policy
// chose, the address the proxy dialled, read with repl (nil: none).
func answeredBy(ctx context.Context, repl feature.Replacer) string {
	if selected, ok := caddyhttp.GetVar(ctx, SelectedVar).(*string); ok {
		return *selected
	}
	if repl == nil {
		return ""
	}
	return repl.ReplaceAll("{http.reverse_proxy.upstream.hostport}", "")
}
