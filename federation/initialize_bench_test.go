package federation

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/session"
)

// initializeLatency is how long each server of the benchmark takes to
// answer initialize: a server across a network, not on loopback.
const initializeLatency = 2 * time.Millisecond

// BenchmarkInitialize is the client's initialize through a federation of
// one server and of three, each taking initializeLatency: asked at once,
// three cost about what one does (eager, in parallel), where one after
// the other would cost three times as much.
func BenchmarkInitialize(b *testing.B) {
	ring, err := session.FromSecrets([]string{"a benchmark secret of 32 bytes.."})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			var servers []*server
			for i := range n {
				servers = append(servers, testServer(fmt.Sprint("s", i), answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
					time.Sleep(initializeLatency)
					w.Header().Set("Mcp-Session-Id", "a-session-of-server")
					return writeRPC(w, req.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"}}`)
				}), nil))
			}
			f := testFederation(servers...)
			f.ring, f.ttl = func() *session.Keyring { return ring }, time.Hour
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
			msgs, _, err := jsonrpc.Parse(body, nil, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(string(body)))
				x := &feature.Exchange{Request: r, Messages: msgs, Body: body, Era: feature.SessionEra}
				w := httptest.NewRecorder()
				f.initializeAll(w, r, x)
				if w.Header().Get("Mcp-Session-Id") == "" {
					b.Fatalf("no session: %s", w.Body)
				}
			}
		})
	}
}
