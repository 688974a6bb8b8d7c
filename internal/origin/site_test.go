package origin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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
		assert.Equal(t, c.want, of(c.host, c.port, c.tls))
	}
}

// The site's address is read from a configuration as Caddy provisions it:
// the hosts the matchers of every route in front of the handler allow,
// down through subroutes, and the server's one port; or why it names no
// single origin.
func TestASiteNamesItsOriginOrWhyItHasNone(t *testing.T) {
	const mcp = `{"handler":"origin_probe"}`
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
		// handlers are given, in order; refused, why there is none.
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
		probed = nil
		cfg := fmt.Sprintf(`{"admin":{"disabled":true},"storage":{"module":"file_system","root":%q},
			"logging":{"logs":{"default":{"level":"ERROR"}}},
			"apps":{"http":{"servers":{"s":{"listen":%s,"automatic_https":{"disable":true},"routes":[%s]%s}}}}}`,
			t.TempDir(), c.listen, c.routes, c.server)
		err := caddy.Validate(mustConfig(t, cfg))
		if c.refused != "" {
			if assert.Error(t, err, c.name) {
				assert.Contains(t, err.Error(), c.refused, c.name)
			}
			continue
		}
		assert.NoError(t, err, c.name)
		assert.Equal(t, c.origins, probed, c.name)
	}
}

func init() {
	caddy.RegisterModule(probe{})
}

// probed are the origins the probes were given, in the order Caddy
// provisioned them.
var probed []string

// probe is a handler that asks OfSite for its site's origin as it is
// provisioned, and refuses to be where there is none.
type probe struct{}

func (probe) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.origin_probe", New: func() caddy.Module { return new(probe) }}
}

func (*probe) Provision(ctx caddy.Context) error {
	o, err := OfSite(ctx)
	if err != nil {
		return err
	}
	probed = append(probed, o)
	return nil
}

func (*probe) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// mustConfig is raw, a JSON config, as Caddy reads it.
func mustConfig(t *testing.T, raw string) *caddy.Config {
	t.Helper()
	var cfg caddy.Config
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg), raw)
	return &cfg
}
