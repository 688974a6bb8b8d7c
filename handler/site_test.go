package handler

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnOriginWritesItsPortOnlyWhenNotTheSchemes(t *testing.T) {
	for _, c := range []struct {
		host string
		port int
		tls  bool
		want string
	}{
		{"mcp.example.com", 443, true, "https://mcp.example.com"},
		{"mcp.example.com", 80, false, "http://mcp.example.com"},
		{"mcp.example.com", 8443, true, "https://mcp.example.com:8443"},
		{"mcp.example.com", 443, false, "http://mcp.example.com:443"},
		{"::1", 443, true, "https://[::1]"},
		{"::1", 8080, false, "http://[::1]:8080"},
	} {
		assert.Equal(t, c.want, origin(c.host, c.port, c.tls))
	}
}

// The site's address is read from a configuration as Caddy provisions it:
// the hosts the matchers of every route in front of the handler allow,
// down through subroutes, and the server's one port. A configuration that
// names no single origin is refused unless it gives resource.
func TestASiteNamesItsOriginOrTheConfigurationGivesResource(t *testing.T) {
	const mcp = `{"handler":"mcp","features":{"authorization":{"issuers":[{"url":"http://127.0.0.1:1"}]}}}`
	host := func(h ...string) string {
		hosts, err := json.Marshal(h)
		require.NoError(t, err)
		return `[{"host":` + string(hosts) + `}]`
	}
	route := func(match, handler string) string {
		if match == "" {
			return `{"handle":[` + handler + `]}`
		}
		return `{"match":` + match + `,"handle":[` + handler + `]}`
	}
	sub := func(routes ...string) string {
		all := routes[0]
		for _, r := range routes[1:] {
			all += "," + r
		}
		return `{"handler":"subroute","routes":[` + all + `]}`
	}
	respond := `{"handler":"static_response","body":"ok"}`
	for _, c := range []struct {
		name, listen, routes, server string
		// server is more of the server's JSON; origins are those the
		// handlers log, in order; refused, why the configuration is.
		origins []string
		refused string
	}{
		{"one host", `[":8080"]`, route(host("mcp.test"), mcp), "", []string{"http://mcp.test:8080"}, ""},
		{"TLS on its own port", `[":443"]`, route(host("mcp.test"), mcp), `,"tls_connection_policies":[{}]`, []string{"https://mcp.test"}, ""},
		{"TLS, but not on the HTTP port", `[":80"]`, route(host("mcp.test"), mcp), `,"tls_connection_policies":[{}]`, []string{"http://mcp.test"}, ""},
		{"each site its own", `[":8080"]`, route(host("other.test"), mcp) + "," + route(host("mcp.test"), respond+","+mcp), "", []string{"http://other.test:8080", "http://mcp.test:8080"}, ""},
		{"a host in front, none in the subroute", `[":8080"]`, route(host("mcp.test"), sub(route("", mcp))), "", []string{"http://mcp.test:8080"}, ""},
		{"two in front, one in the subroute", `[":8080"]`, route(host("a.test", "mcp.test"), sub(route(`[{"path":["/mcp*"]}]`, respond), route(host("MCP.test"), mcp))), "", []string{"http://mcp.test:8080"}, ""},
		{"any host", `[":8080"]`, route("", mcp), "", nil, "the site answers for any host"},
		{"a host, or any", `[":8080"]`, route(`[{"host":["mcp.test"]},{"path":["/mcp"]}]`, mcp), "", nil, "the site answers for any host"},
		{"two hosts", `[":8080"]`, route(host("a.test", "mcp.test"), mcp), "", nil, "the site answers for 2 hosts (a.test, mcp.test)"},
		{"hosts that share none", `[":8080"]`, route(host("a.test"), sub(route(host("mcp.test"), mcp))), "", nil, "no host passes the site's matchers"},
		{"a placeholder", `[":8080"]`, route(host("{env.MCP_HOST}"), mcp), "", nil, "the site answers for the hosts {env.MCP_HOST}"},
		{"several ports", `[":8080", ":8081"]`, route(host("mcp.test"), mcp), "", nil, "the server listens on several ports (:8080, :8081)"},
		{"a port range", `[":8080-8081"]`, route(host("mcp.test"), mcp), "", nil, "the server listens on several ports"},
		{"a unix socket", `["unix//tmp/mcp.sock"]`, route(host("mcp.test"), mcp), "", nil, "which has no port"},
		{"a named route", `[":8080"]`, route(host("mcp.test"), `{"handler":"invoke","name":"m"}`), `,"named_routes":{"m":` + route("", mcp) + `}`, nil, "it is in a named route"},
		{"inside a handler that is no subroute", `[":8080"]`, route(host("mcp.test"), `{"handler":"reverse_proxy","upstreams":[{"dial":"127.0.0.1:1"}],"handle_response":[{"routes":[`+route("", mcp)+`]}]}`), "", nil, "the handler is inside reverse_proxy"},
	} {
		logs := filepath.Join(t.TempDir(), "log")
		cfg := fmt.Sprintf(`{"admin":{"disabled":true},"storage":{"module":"file_system","root":%q},
			"logging":{"logs":{"default":{"level":"ERROR"},"mcp":{"level":"INFO","include":["http.handlers.mcp"],"writer":{"output":"file","filename":%q}}}},
			"apps":{"http":{"servers":{"s":{"listen":%s,"automatic_https":{"disable":true},"routes":[%s]%s}}}}}`,
			t.TempDir(), logs, c.listen, c.routes, c.server)
		err := caddy.Validate(mustConfig(t, cfg))
		if c.refused != "" {
			if assert.Error(t, err, c.name) {
				assert.Contains(t, err.Error(), "authorization: resource is required", c.name)
				assert.Contains(t, err.Error(), c.refused, c.name)
			}
			continue
		}
		assert.NoError(t, err, c.name)
		assert.Equal(t, c.origins, resourcesLogged(t, logs), c.name)
	}
}

// resourcesLogged are the canonical URLs the handlers logged at start.
func resourcesLogged(t *testing.T, file string) []string {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []string
	for line := range strings.Lines(string(text)) {
		var entry struct{ Msg, Resource string }
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		if strings.Contains(entry.Msg, "must be issued for") {
			out = append(out, entry.Resource)
		}
	}
	return out
}

// mustConfig is raw, a JSON config, as Caddy reads it.
func mustConfig(t *testing.T, raw string) *caddy.Config {
	t.Helper()
	var cfg caddy.Config
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg), raw)
	return &cfg
}
