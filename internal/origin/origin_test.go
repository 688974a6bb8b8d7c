package origin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalizeOriginWritesSchemeHostAndPort(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"https://app.example.com", "https://app.example.com", true},
		{"HTTPS://App.Example.COM", "https://app.example.com", true},
		{"  https://app.example.com  ", "https://app.example.com", true},
		{"https://app.example.com/", "https://app.example.com", true},
		{"http://localhost:80", "http://localhost", true},
		{"https://x.example:443", "https://x.example", true},
		{"http://x.example:443", "http://x.example:443", true},
		{"https://x.example:80", "https://x.example:80", true},
		{"http://localhost:6274", "http://localhost:6274", true},
		{"http://[::1]:8080", "http://[::1]:8080", true},
		{"http://[::1]", "http://[::1]", true},
		{"http://[::1]:80", "http://[::1]", true},
		{"http://127.0.0.1:3000", "http://127.0.0.1:3000", true},
		{"app.example.com", "", false},
		{"//app.example.com", "", false},
		{"ftp://app.example.com", "", false},
		{"https://app.example.com/path", "", false},
		{"https://app.example.com?q=1", "", false},
		{"https://app.example.com#frag", "", false},
		{"https://user:pw@app.example.com", "", false},
		{"null", "", false},
		{"", "", false},
		{"http://", "", false},
		{"https://%zz", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := normalize(tt.in)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestOriginPolicyAllows(t *testing.T) {
	listed := []string{"https://App.example.com", "http://127.0.0.1:9000"}
	tests := []struct {
		name    string
		allowed []string
		origins []string
		want    bool
	}{
		{"no Origin: an MCP client", nil, nil, true},
		{"no Origin, even with a list", listed, nil, true},
		{"loopback by default: localhost", nil, []string{"http://localhost:6274"}, true},
		{"loopback by default: 127.0.0.1", nil, []string{"http://127.0.0.1:3000"}, true},
		{"loopback by default: another 127/8 address", nil, []string{"http://127.2.3.4"}, true},
		{"loopback by default: ::1", nil, []string{"http://[::1]:8080"}, true},
		{"loopback by default: *.localhost", nil, []string{"https://app.localhost"}, true},
		{"a rebinding page is not loopback", nil, []string{"http://evil.example"}, false},
		{"a name that only starts like localhost", nil, []string{"http://localhost.evil.example"}, false},
		{"a private address is not loopback", nil, []string{"http://192.168.1.10"}, false},
		{"listed, in another letter case", listed, []string{"https://app.example.com"}, true},
		{"listed, with its default port", listed, []string{"https://app.example.com:443"}, true},
		{"listed, with its port", listed, []string{"http://127.0.0.1:9000"}, true},
		{"a list replaces the loopback default", listed, []string{"http://localhost:6274"}, false},
		{"another port of a listed host", listed, []string{"https://app.example.com:8443"}, false},
		{"another scheme of a listed host", listed, []string{"http://app.example.com"}, false},
		{"any origin with *", []string{"*"}, []string{"https://anything.example"}, true},
		{"* next to a list", []string{"https://a.example", "*"}, []string{"https://b.example"}, true},
		{"two Origin headers", nil, []string{"http://localhost", "http://localhost"}, false},
		{"two Origin headers, even with *", []string{"*"}, []string{"https://a.example", "https://b.example"}, false},
		{"a malformed origin", nil, []string{"localhost:6274"}, false},
		{"a null origin", nil, []string{"null"}, false},
		{"a malformed origin with a list", listed, []string{"https://app.example.com/x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.allowed)
			require.NoError(t, err)
			r := post()
			for _, o := range tt.origins {
				r.Header.Add("Origin", o)
			}
			assert.Equal(t, tt.want, p.Allows(r))
		})
	}
}

func TestAMalformedOriginIsRefusedEvenWithStar(t *testing.T) {
	p, err := NewPolicy([]string{"*"})
	require.NoError(t, err)
	r := post()
	r.Header.Set("Origin", "not an origin")
	assert.False(t, p.Allows(r))
}

func TestCheckNamesTheFirstEntryThatIsNoOrigin(t *testing.T) {
	require.NoError(t, Check([]string{"https://app.example.com", "*", "http://localhost:6274"}))
	require.NoError(t, Check(nil))
	err := Check([]string{"https://ok.example", "app.example.com"})
	require.Error(t, err)
	assert.Equal(t, `allowed_origins: "app.example.com" is not an origin such as https://app.example.com`, err.Error())
}

// post is a JSON-RPC POST as an MCP client sends it, without an Origin.
func post() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Content-Type", "application/json")
	return r
}
