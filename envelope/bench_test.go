package envelope_test

import (
	"encoding/json"
	"testing"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// Run with:
//
//	go test -run XXX -bench . -benchmem -count 3 ./envelope/

func BenchmarkRenderExample(b *testing.B) {
	e := contractExample()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendText(buf[:0])
	}
}

func BenchmarkRenderToolResult(b *testing.B) {
	e := contractExample()
	id := json.RawMessage(`12345678901234567890123`)
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendToolResult(buf[:0], id)
	}
}

func BenchmarkRenderRPCError(b *testing.B) {
	e := contractExample()
	id := json.RawMessage(`7`)
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendRPCError(buf[:0], id, envelope.CodeServerError)
	}
}

func BenchmarkParseExample(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.Parse(contractExampleText); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidationText(b *testing.B) {
	problems := []envelope.FieldProblem{
		{Path: "id", Problem: "Invalid email format", Sent: json.RawMessage(`"not-an-email"`), Expected: "Expected a valid email address."},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = envelope.ValidationText("billing.get_invoice", problems)
	}
}
