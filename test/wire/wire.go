// Package wire builds and reads the JSON-RPC messages that tests send to the
// gateway and get back from it: tool calls and batches of them, bodies of a
// given size, and the outcome of an answer (the upstream's result, or the
// code of the gateway's envelope). It depends on nothing of the gateway but
// the envelope package, so that the handler's own tests can use it too.
package wire

import (
	"fmt"
	"strings"
)

// ToolCall is a tools/call of tool with a string id and empty arguments. The
// strings are quoted as Go quotes them, which is JSON for printable text.
func ToolCall(id, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
}

// NumberedCall is a tools/call of tool with a number id and params holding
// the name only, as a batch of Batch holds them.
func NumberedCall(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q}}`, id, tool)
}

// Batch is a batch of n NumberedCalls of tool, with ids from first.
func Batch(first, n int, tool string) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = NumberedCall(first+i, tool)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// The id and the progress token of a ProgressCall, as JSON.
const (
	ProgressCallID = `7`
	ProgressToken  = `"p"`
)

// ProgressCall is a tools/call of tool with empty arguments, the id
// ProgressCallID, and the progress token ProgressToken.
func ProgressCall(tool string) string {
	return `{"jsonrpc":"2.0","id":` + ProgressCallID + `,"method":"tools/call","params":{"name":"` + tool +
		`","arguments":{},"_meta":{"progressToken":` + ProgressToken + `}}}`
}

// ToolsCallOfSize returns a tools/call request of exactly size bytes whose
// arguments look like a real agent's: nested objects, arrays of records,
// strings with escapes and non-ASCII text.
func ToolsCallOfSize(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":"call-7f3a9c","method":"tools/call","params":{"_meta":{"progressToken":42},` +
		`"name":"search_documents","arguments":{"query":"quarterly revenue \"EMEA\"\nexcluding refunds",` +
		`"filters":{"date":{"from":"2026-01-01","to":"2026-03-31"},"tags":["finance","q1","résumé"],"limit":25,"exact":false},` +
		`"documents":[`)
	const tail = `]}}}`
	for i := 0; ; i++ {
		doc := fmt.Sprintf(`{"id":%d,"title":"Report \u00e9t\u00e9 %d","score":%d.%03de-1,"path":"C:\\reports\\%d.pdf","seen":null},`, i, i, i%10, i*37%1000, i)
		if b.Len()+len(doc)+len(`{"pad":""}`)+len(tail) > size {
			break
		}
		b.WriteString(doc)
	}
	pad := size - b.Len() - len(`{"pad":""}`) - len(tail)
	b.WriteString(`{"pad":"` + strings.Repeat("x", pad) + `"}`)
	b.WriteString(tail)
	return []byte(b.String())
}
