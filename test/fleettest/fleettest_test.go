package fleettest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

const toolCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`

// call posts a tools/call to the node and returns the status and body.
func call(t *testing.T, n *Node) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.URL()+"/mcp", strings.NewReader(toolCall))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return do(t, req)
}

// do sends req on a connection of its own: a reload closes the node's idle
// connections, and a request sent on one of them as it closes fails with
// EOF, which is the client's race, not the node's.
func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestTwoNodes runs two gateways in front of one upstream: each answers,
// each with limits of its own, since nothing is shared between the
// processes yet.
func TestTwoNodes(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"from upstream"}]}}`)
	}))
	t.Cleanup(upstream.Close)
	site := "mcp {\n\trate_limit per_client {\n\t\trate 1/1h\n\t}\n}\nreverse_proxy " + upstream.Listener.Addr().String()
	a, b := StartNode(t, site), StartNode(t, site)
	if a.URL() == b.URL() || a.Admin() == b.Admin() {
		t.Fatalf("two nodes on the same ports: %s %s, %s %s", a.URL(), a.Admin(), b.URL(), b.Admin())
	}

	for _, n := range []*Node{a, b} {
		if status, body := call(t, n); status != http.StatusOK || !strings.Contains(body, "from upstream") {
			t.Fatalf("first call through %s: %d %s", n.URL(), status, body)
		}
	}
	if status, body := call(t, a); status != http.StatusOK || !strings.Contains(body, "RATE_LIMITED") {
		t.Fatalf("second call through %s: %d %s, want RATE_LIMITED", a.URL(), status, body)
	}

	b.Reload(t, `respond "reloaded" 200`)
	if status, body := do(t, mustRequest(t, b.URL()+"/")); status != http.StatusOK || body != "reloaded" {
		t.Fatalf("after reload: %d %q", status, body)
	}

	a.Stop()
	if resp, err := http.Get(a.URL() + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("a stopped node answered: %s", resp.Status)
	}
	if status, _ := do(t, mustRequest(t, b.URL()+"/")); status != http.StatusOK {
		t.Fatalf("the other node, after one stopped: %d", status)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
