package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Run with:
//
//	go test -run '^$' -bench Inspect -benchmem ./internal/jsonrpc/
//
// The 1 KiB case should stay under 2 µs/op with no more than 2 allocs/op.

func benchmarkInspectToolsCall(b *testing.B, size int) {
	body := wire.ToolsCallOfSize(size)
	if len(body) != size || !json.Valid(body) {
		b.Fatalf("bad benchmark body: %d bytes, valid %v", len(body), json.Valid(body))
	}
	var buf [1]Message
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, _, err := Parse(body, buf[:0], unlimited)
		if err != nil || len(msgs) != 1 || string(msgs[0].Name) != "search_documents" {
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
	var buf [1]Message
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Parse(body, buf[:0], unlimited); err != nil {
			b.Fatal(err)
		}
	}
}
