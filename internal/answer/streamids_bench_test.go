package answer

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkTrackerFollowsAStreamWithIDs follows a call's event stream as a
// resumable server writes it: 100 progress notifications, each with an
// event id, then the response; one write per event.
func BenchmarkTrackerFollowsAStreamWithIDs(b *testing.B) {
	var events [][]byte
	n := 0
	for i := range 100 {
		e := fmt.Sprintf("id: 0194c2d3-%04d\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":%d,\"total\":100}}\n\n", i, i)
		events = append(events, []byte(e))
		n += len(e)
	}
	last := "id: 0194c2d3-9999\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + strings.Repeat("x", 512) + "\"}]}}\n\n"
	events = append(events, []byte(last))
	b.SetBytes(int64(n + len(last)))
	for b.Loop() {
		tr := newStream(parsed(b, callOne), sessionEra)
		for _, e := range events {
			tr.observe(e)
		}
	}
}
