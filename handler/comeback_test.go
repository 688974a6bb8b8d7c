package handler

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestASessionsStreamWhoseUpstreamIsDownIsAskedToComeBack(t *testing.T) {
	refused := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return caddyhttp.Error(http.StatusBadGateway, reverseproxy.DialError{})
	})
	tests := []struct {
		name     string
		req      *http.Request
		comeBack bool
	}{
		{"the standalone GET of a session", newRequest(http.MethodGet, "", withSession("s")), true},
		{"a GET of no session", newRequest(http.MethodGet, ""), false},
		{"a GET of the stateless era", newRequest(http.MethodGet, "", withSession("s"), func(r *http.Request) {
			r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		}), false},
		{"a POST of a session", post(callOne, withSession("s")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			tt.req.Header.Set("Accept", "text/event-stream")
			w := httptest.NewRecorder()
			require.NoError(t, h.ServeHTTP(w, tt.req, refused))
			if !tt.comeBack {
				assert.NotEqual(t, "retry: 2000\n\n", w.Body.String())
				return
			}
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
			assert.Equal(t, "retry: 2000\n\n", w.Body.String())
		})
	}
}
