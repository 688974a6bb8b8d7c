package test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// idleStream is an upstream whose GET stream stays idle until the test
// releases it, then writes one event and ends. Its event's data line is
// written in two halves, some way apart, as a slow server might.
func idleStream(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		flush := http.NewResponseController(w).Flush
		_ = flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",")
		_ = flush()
		// Idle in the middle of a line: no keep-alive may be written here.
		time.Sleep(150 * time.Millisecond)
		_, _ = io.WriteString(w, "\"method\":\"notifications/message\"}\n\n")
		_ = flush()
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestIdleEventStreamGetsCommentLinesAndEventsStayWhole(t *testing.T) {
	release := make(chan struct{})
	g := mcptest.StartGateway(t, "mcp {\n\tsse_keepalive 50ms\n}\nreverse_proxy "+idleStream(t, release))

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, g.URL+"/mcp", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended early")
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("nothing arrived on the stream")
			return ""
		}
	}
	assert.Equal(t, ":", next(), "an idle stream gets a comment line")
	assert.Equal(t, ":", next(), "and another while it stays idle")
	close(release)
	var got []string
	for l := range lines {
		if l != ":" {
			got = append(got, l)
		}
	}
	assert.Equal(t, []string{
		"event: message",
		`data: {"jsonrpc":"2.0","method":"notifications/message"}`,
		"",
	}, got, "the event arrives whole: no comment inside its line")
}
