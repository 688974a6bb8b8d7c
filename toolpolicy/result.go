package toolpolicy

import (
	"bytes"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// IsError reports whether a tools/call result says the tool failed
// (isError true); ok is false when that cannot be read with certainty.
func IsError(result []byte) (isError, ok bool) {
	m, err := member(result, "isError")
	if err != nil {
		return false, false
	}
	return m.Start != 0 && string(result[m.Start:m.End]) == "true", true
}

// AppendContent returns a tools/call result with block added at the end of
// its content, when the result is a success (isError absent or false)
// that holds a content array; ok reports whether it was added. The result's
// other members, structuredContent included, are kept as written.
func AppendContent(result, block []byte) (out []byte, ok bool) {
	var content jsonrpc.Member
	bad := false
	err := jsonrpc.Members(result, func(m jsonrpc.Member) bool {
		switch {
		case bytes.EqualFold(m.Key, []byte("isError")):
			bad = bad || string(m.Key) != "isError" || string(result[m.Start:m.End]) != "false"
		case bytes.EqualFold(m.Key, []byte("content")):
			bad = bad || string(m.Key) != "content" || content.Start != 0
			content = m
		}
		return !bad
	})
	if err != nil || bad || content.Start == 0 || result[content.Start] != '[' {
		return result, false
	}
	closing := content.End - 1 // the array's ']'
	empty := len(bytes.TrimSpace(result[content.Start+1:closing])) == 0
	out = make([]byte, 0, len(result)+len(block)+1)
	out = append(out, result[:closing]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, block...)
	return append(out, result[closing:]...), true
}
