package handler

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Run with:
//
//	go test -run '^$' -bench Inspect -benchmem ./handler/
//
// The 1 KiB case should stay under 2 µs/op with no more than 2 allocs/op.

// toolsCallBody returns a tools/call request of exactly size bytes whose
// arguments look like a real agent's: nested objects, arrays of records,
// strings with escapes and non-ASCII text.
func toolsCallBody(size int) []byte {
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

func benchmarkInspectToolsCall(b *testing.B, size int) {
	body := toolsCallBody(size)
	if len(body) != size || !json.Valid(body) {
		b.Fatalf("bad benchmark body: %d bytes, valid %v", len(body), json.Valid(body))
	}
	var buf [1]message
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, _, err := parseMessages(body, buf[:0], unlimited)
		if err != nil || len(msgs) != 1 || string(msgs[0].tool) != "search_documents" {
			b.Fatalf("parse: %v %v", msgs, err)
		}
	}
}

func BenchmarkInspectToolsCall1KiB(b *testing.B)  { benchmarkInspectToolsCall(b, 1<<10) }
func BenchmarkInspectToolsCall64KiB(b *testing.B) { benchmarkInspectToolsCall(b, 64<<10) }

// BenchmarkInspectToolsCall64KiBText is a 64 KiB tools/call whose argument
// is one long string of prose with escapes, such as a document passed to a
// tool (the body of go run ./bench): the case where skipping string bytes
// quickly matters most.
func BenchmarkInspectToolsCall64KiBText(b *testing.B) {
	head := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"summarize","arguments":{"text":"`
	tail := `"}}}`
	const prose = `The gateway reads every call before the server does; it must not be what the user waits for. \"Quoted,\" she said.\n`
	text := strings.Repeat(prose, 64<<10/len(prose)+1)[:64<<10-len(head)-len(tail)]
	text = strings.TrimRight(text, `\`)
	body := []byte(head + text + tail)
	var buf [1]message
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseMessages(body, buf[:0], unlimited); err != nil {
			b.Fatal(err)
		}
	}
}
