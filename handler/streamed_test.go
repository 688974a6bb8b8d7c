package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// A call declared longer than stream_above goes to the upstream as it
// arrives, decided on its head: each case is one the handler's own
// tests reach only through a real Caddy otherwise.

// streamedCall is a tools/call of tool whose arguments make it n bytes
// long, ending with tail.
func streamedCall(tool string, n int, tail string) string {
	head := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"q":"`
	end := `"}}}` + tail
	return head + strings.Repeat("x", n-len(head)-len(`"}}}`)) + end
}

// reading is an upstream that reads the whole body it is sent, and
// answers upstreamAnswer once it has.
type reading struct {
	body    []byte
	readErr error
	calls   int
}

func (u *reading) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	u.calls++
	u.body, u.readErr = io.ReadAll(r.Body)
	if u.readErr != nil {
		return u.readErr
	}
	w.Header().Set("Content-Type", "application/json")
	_, err := io.WriteString(w, upstreamAnswer)
	return err
}

func TestAStreamedCallReachesTheUpstreamWhole(t *testing.T) {
	h := provision(t, &Handler{StreamAbove: 1024})
	body := streamedCall("search", 8<<10, "")
	r := post(body)
	require.True(t, h.streams(r))
	u := &reading{}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, r, u))
	require.NoError(t, u.readErr)
	assert.Equal(t, body, string(u.body))
	assert.Equal(t, upstreamAnswer, w.Body.String())
}

func TestAStreamedCallRefusedOnItsHeadNeverGoesUpstream(t *testing.T) {
	h := provision(t, &Handler{StreamAbove: 1024, FeaturesRaw: guests(t, map[string]any{"feature": "test_first", "refuse": "secret"})})
	guestSteps()
	u := &reading{}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(streamedCall("secret", 8<<10, "")), u))
	assert.Zero(t, u.calls)
	assert.Contains(t, w.Body.String(), `FORBIDDEN`)
	assert.Equal(t, []string{"test_first checked", "test_first observed FORBIDDEN"}, guestSteps())
}

// A body that turns out not to be one JSON-RPC message after its head
// went upstream: the upstream's read of it fails, so it never runs a
// request the gateway did not read whole, and the client is told.
func TestAStreamedBodyThatEndsBadlyIsCutOffUpstream(t *testing.T) {
	h := provision(t, &Handler{StreamAbove: 1024})
	u := &reading{}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(streamedCall("search", 8<<10, `{"jsonrpc":"2.0"}`)), u))
	require.Equal(t, 1, u.calls)
	assert.ErrorIs(t, u.readErr, reqbody.ErrRefused)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), `unexpected data after the message`)
	assert.Contains(t, w.Body.String(), `"code":-32700`)
}
