package handler

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestABadKeyIsRefusedNamingTheTemplate(t *testing.T) {
	err := (&RateLimit{Rate: "1/s", Key: "{clientip}"}).Validate()
	require.Error(t, err)
	assert.Equal(t, `key "{clientip}": unknown placeholder {clientip}: did you mean {client_ip}?`, err.Error())
}

func TestKeysReadTheRequestAsServersRead(t *testing.T) {
	tests := []struct {
		name   string
		key    string
		first  func(*http.Request)
		second func(*http.Request)
		// shared: both requests take from one bucket.
		shared bool
	}{
		{"a bearer token in any spelling is one key", "{header.Authorization}",
			header("Authorization", "Bearer secret"), header("Authorization", "BEARER   secret"), true},
		{"tabs are whitespace too", "{http.mcp.authorization}",
			header("Authorization", "bearer\tsecret"), header("Authorization", "Bearer secret"), true},
		{"another token is another key", "{header.Authorization}",
			header("Authorization", "Bearer a"), header("Authorization", "Bearer b"), false},
		{"a cookie", "{cookie.session}",
			func(r *http.Request) { r.Header.Set("Cookie", "session=a") }, func(r *http.Request) { r.Header.Set("Cookie", "session=b") }, false},
		{"a query parameter", "{query.tenant}",
			func(r *http.Request) { r.URL.RawQuery = "tenant=a" }, func(r *http.Request) { r.URL.RawQuery = "tenant=a&x=1" }, true},
		{"a header mixed with literal text", "t:{header.X-Tenant}:x",
			header("X-Tenant", "a"), header("X-Tenant", "b"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "1/1h", Key: tt.key})
			u := &upstream{}
			requireForwarded(t, u, 1, serve(t, h, post(callOne, tt.first), u))
			w := serve(t, h, post(callOne, tt.second), u)
			if tt.shared {
				assert.Contains(t, w.Body.String(), "RATE_LIMITED")
			} else {
				requireForwarded(t, u, 2, w)
			}
		})
	}
}

func TestAnInputAKeyReadsMayBeGivenOnce(t *testing.T) {
	tests := []struct {
		name, key string
		opt       func(*http.Request)
		message   string
	}{
		{"a header", "{header.X-Tenant}", func(r *http.Request) { r.Header["X-Tenant"] = []string{"a", "b"} },
			"Request is ambiguous: the X-Tenant header is given 2 times"},
		{"a cookie, in any letter case", "{cookie.session}", func(r *http.Request) { r.Header.Set("Cookie", "session=a; SESSION=b") },
			"Request is ambiguous: the cookie session is given 2 times"},
		{"a query parameter", "{query.tenant}", func(r *http.Request) { r.URL.RawQuery = "tenant=a&tenant=b&tenant=c" },
			"Request is ambiguous: the query parameter tenant is given 3 times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "10/1h", Key: tt.key})
			u := &upstream{}
			w := serve(t, h, post(callOne, tt.opt), u)
			assert.Zero(t, u.calls)
			assert.Equal(t, http.StatusBadRequest, w.Code)
			assert.Equal(t, tt.message, decodeRPCError(t, members(t, w.Body.Bytes())["error"]).Message)
		})
	}
	t.Run("inputs no key reads may repeat", func(t *testing.T) {
		h := limited(t, RateLimit{Rate: "10/1h", Key: "{cookie.session}"})
		u := &upstream{}
		requireForwarded(t, u, 1, serve(t, h, post(callOne, func(r *http.Request) {
			r.Header.Set("Cookie", "session=a; other=1; other=2")
			r.URL.RawQuery = "x=1&x=2"
			r.Header["X-Other"] = []string{"1", "2"}
		}), u))
	})
}
