package test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Event streams a tools policy must read, as upstreams write them: what a
// hidden tool's name never crosses, and what a stream's client still gets.

const hidingPolicy = "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\n"

// listResult is a tools/list result holding a hidden tool and an allowed one.
const listResult = `{"tools":[{"name":"admin_reset","inputSchema":{"type":"object"}},{"name":"search","inputSchema":{"type":"object"}}]}`

// streamUpstream answers every POST and GET with the event stream
// write writes, under status and the given headers.
func streamUpstream(t *testing.T, status int, header http.Header, write func(w io.Writer, id string, done <-chan struct{})) string {
	return mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "null"
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			if _, rest, ok := strings.Cut(string(b), `"id":`); ok {
				id, _, _ = strings.Cut(rest, ",")
			}
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		write(w, id, r.Context().Done())
	}))
}

// getStream sends a GET resuming a stream, and returns what came of it; a
// stream that has not ended in 30 seconds fails the test.
func getStream(t *testing.T, endpoint string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, endpoint, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", "s1")
	req.Header.Set("Last-Event-ID", "e1")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ends")
	return resp.StatusCode, string(b)
}

// A priming event (an id, and empty data: what the TypeScript SDK's server
// writes first on every stream once it keeps events) is no message: the
// list after it is filtered and delivered, not refused as unreadable.
func TestAPrimingEventDoesNotSpoilTheList(t *testing.T) {
	up := streamUpstream(t, http.StatusOK, nil, func(w io.Writer, id string, _ <-chan struct{}) {
		fmt.Fprintf(w, "id: e0\ndata: \n\nid: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, listResult)
	})
	g := mcptest.StartGateway(t, hidingPolicy+mcptest.ProxyTo(up))
	_, body := post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	assert.Contains(t, string(body), `"search"`)
	assert.NotContains(t, string(body), "admin_reset")
	assert.NotContains(t, string(body), "INTERNAL_ERROR")
	assert.Contains(t, string(body), "id: e0\ndata: \n\n", "the priming event passes as it came")
}

// Streams the gateway reads for a policy, and what each gives the client.
func TestResumedStreamsAHidingPolicyReads(t *testing.T) {
	big := strings.Repeat("x", 1100<<10)
	tests := []struct {
		name   string
		status int
		header http.Header
		write  func(w io.Writer, id string, done <-chan struct{})
		check  func(t *testing.T, status int, body string)
	}{
		{"a call result over 1 MiB passes unread", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", big)
		}, func(t *testing.T, status int, body string) {
			assert.Equal(t, http.StatusOK, status)
			assert.Contains(t, body, big[:1000])
			assert.NotContains(t, body, "INTERNAL_ERROR")
		}},
		{"a list over 1 MiB is not sent", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"tools\":[{\"name\":\"admin_reset\",\"description\":%q}]}}\n\n", big)
		}, func(t *testing.T, _ int, body string) {
			assert.NotContains(t, body, "admin_reset")
			assert.Contains(t, body, "INTERNAL_ERROR")
		}},
		{"a byte order mark first hides no event", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "\xef\xbb\xbfid: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult)
		}, func(t *testing.T, _ int, body string) {
			assert.Contains(t, body, `"search"`)
			assert.NotContains(t, body, "admin_reset")
		}},
		{"an edited stream loses its Content-Length", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult)
		}, func(t *testing.T, _ int, body string) {
			assert.Contains(t, body, `"search"`, "the whole edited event, not cut at the upstream's length")
			assert.NotContains(t, body, "admin_reset")
		}},
		{"a stream under another success status is not sent unread", http.StatusNonAuthoritativeInfo, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult)
		}, func(t *testing.T, _ int, body string) {
			assert.NotContains(t, body, "admin_reset")
			assert.Contains(t, body, "INTERNAL_ERROR")
		}},
		{"a compressed stream is answered at once", http.StatusOK, http.Header{"Content-Encoding": {"br"}}, func(w io.Writer, _ string, done <-chan struct{}) {
			fmt.Fprint(w, "not really brotli")
			w.(http.Flusher).Flush()
			<-done // an upstream that never ends its stream
		}, func(t *testing.T, _ int, body string) {
			assert.Contains(t, body, "INTERNAL_ERROR")
			assert.NotContains(t, body, "not really brotli")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if tt.name == "an edited stream loses its Content-Length" {
				n := len(fmt.Sprintf("id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult))
				header = http.Header{"Content-Length": {fmt.Sprint(n)}}
			}
			up := streamUpstream(t, tt.status, header, tt.write)
			g := mcptest.StartGateway(t, hidingPolicy+mcptest.ProxyTo(up))
			status, body := getStream(t, g.URL+"/mcp")
			tt.check(t, status, body)
		})
	}
}

// Hidden and missing tools look alike in a batch, in a call too large to
// validate, and a call sent as a notification naming a hidden tool is
// refused too.
func TestHiddenAndMissingToolsLookAlikeEverywhere(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp {\n\tvalidate\n\tmax_batch 4\n\ttools {\n\t\tdeny delete_*\n\t}\n}\n"+mcptest.ProxyTo(listServer(t)))
	url := g.URL + "/mcp"
	postAs(t, url, "Bearer alice", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)

	batch := func(tool string) string {
		return postAs(t, url, "Bearer alice", `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	}
	hidden, missing := batch("delete_invoice"), batch("remove_invoice")
	assert.Contains(t, hidden, "nothing in the batch ran")
	assert.Equal(t, hidden, strings.ReplaceAll(missing, "remove_invoice", "delete_invoice"), "a batch: the same answer, but for the name")

	large := func(tool string) string {
		return postAs(t, url, "Bearer alice", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"pad":"`+strings.Repeat("p", 300<<10)+`"}}}`)
	}
	hidden, missing = large("delete_invoice"), large("remove_invoice")
	assert.Contains(t, hidden, "UNKNOWN_ACTION")
	assert.Equal(t, hidden, strings.ReplaceAll(missing, "remove_invoice", "delete_invoice"), "over the size validate checks: the same answer")

	resp, body := post(t, url, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_invoice","arguments":{}}}`, withHeader("Authorization", "Bearer alice"))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a call sent as a notification")
	assert.Equal(t, "UNKNOWN_ACTION", envelopeCode(t, body))
}

func envelopeCode(t *testing.T, body []byte) string {
	t.Helper()
	env, err := wire.ErrorEnvelope(body)
	require.NoError(t, err, "%s", body)
	return string(env.Code)
}
