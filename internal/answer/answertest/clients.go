package answertest

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// BrokenClient is a client connection that broke: every write and flush
// fails.
type BrokenClient struct {
	mu      sync.Mutex
	Hdr     http.Header
	status  int
	writes  int
	flushes int
}

// ErrBrokenPipe is what a BrokenClient's writes fail with.
var ErrBrokenPipe = errors.New("write: broken pipe")

func (c *BrokenClient) Header() http.Header { return c.Hdr }

func (c *BrokenClient) WriteHeader(s int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == 0 {
		c.status = s
	}
}

func (c *BrokenClient) Write([]byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return 0, ErrBrokenPipe
}

func (c *BrokenClient) FlushError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushes++
	return ErrBrokenPipe
}

// Counts is how many writes and flushes were tried.
func (c *BrokenClient) Counts() (writes, flushes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.flushes
}

// LockedRecorder is a ResponseRecorder that a goroutine writing
// keep-alives and the test may use at once.
type LockedRecorder struct {
	mu sync.Mutex
	*httptest.ResponseRecorder
}

// NewLockedRecorder is a LockedRecorder with nothing recorded.
func NewLockedRecorder() *LockedRecorder {
	return &LockedRecorder{ResponseRecorder: httptest.NewRecorder()}
}

func (l *LockedRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ResponseRecorder.Write(p)
}

func (l *LockedRecorder) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ResponseRecorder.Flush()
}

// Flushed reports whether it was flushed.
func (l *LockedRecorder) Flushed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ResponseRecorder.Flushed
}

// Body is what was written.
func (l *LockedRecorder) Body() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ResponseRecorder.Body.String()
}

// Members decodes one JSON-RPC response into its members, kept as raw
// bytes so that ids can be compared byte for byte.
func Members(t testing.TB, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	require.JSONEq(t, `"2.0"`, string(m["jsonrpc"]))
	return m
}

// ToolError reads a CallToolResult that carries an envelope, and whether
// it is an error.
func ToolError(t testing.TB, result json.RawMessage) (envelope.Parsed, bool) {
	t.Helper()
	var r struct {
		IsError bool `json:"isError"`
	}
	require.NoError(t, json.Unmarshal(result, &r))
	env, err := envelope.ParseResult(result)
	require.NoError(t, err, "%s", result)
	return env, r.IsError
}

// RPCError reads a JSON-RPC error object carrying an envelope.
func RPCError(t testing.TB, raw json.RawMessage) wire.Error {
	t.Helper()
	var e wire.Error
	require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
	return e
}
