package test

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The seam that several servers behind one endpoint rest on, shown with a
// feature built only here: one handler, two upstream routes, each a Caddy
// route with its own reverse_proxy to a server of its own (the Go SDK's,
// stateless), and a router that sends each tools/call to the route its
// tool is given to, renaming it on the way when clients know it under
// its route's name. Everything else goes to the handler's next
// reverse_proxy, a third server.
func init() {
	caddy.RegisterModule(routeByTool{})
}

// routeByTool routes a tools/call to the upstream route its tool names,
// and a tool named "<route>.<tool>" to that route as "<tool>": the name
// its server knows it by.
type routeByTool struct {
	Tools map[string]string `json:"tools"`
}

func (routeByTool) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: feature.Namespace + ".test_route_by_tool", New: func() caddy.Module { return new(routeByTool) }}
}

func (r *routeByTool) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Router: r, Rewriter: r}, nil
}

func (r *routeByTool) Route(x *feature.Exchange) string {
	m := x.Single()
	if m == nil || !feature.IsCall(m) {
		return ""
	}
	if route, _, ok := strings.Cut(string(m.Name), "."); ok {
		return route
	}
	return r.Tools[string(m.Name)]
}

func (r *routeByTool) Rewrite(x *feature.Exchange, body []byte) []byte {
	m := x.Single()
	if m == nil || !feature.IsCall(m) {
		return nil
	}
	route, tool, ok := strings.Cut(string(m.Name), ".")
	if !ok {
		return nil
	}
	return bytes.Replace(body, []byte(`"name":"`+route+"."+tool+`"`), []byte(`"name":"`+tool+`"`), 1)
}

// seenServer is a stateless demo server that records the JSON-RPC method
// of each POST it is sent.
type seenServer struct {
	url     string
	mu      sync.Mutex
	methods []string
}

func startSeenServer(t *testing.T) *seenServer {
	s := &seenServer{}
	demo := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return demoserver.New() }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	s.url = mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.methods = append(s.methods, r.Header.Get("Mcp-Method"))
		s.mu.Unlock()
		demo.ServeHTTP(w, r)
	}))
	return s
}

func (s *seenServer) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.methods {
		if m == "tools/call" {
			n++
		}
	}
	return n
}

// proxyRoutes is an upstream route: a reverse_proxy to url.
func proxyRoutes(url string) []any {
	host := strings.TrimPrefix(strings.TrimSuffix(url, mcptest.MCPPath), "http://")
	return []any{map[string]any{"handle": []any{map[string]any{
		"handler":   "reverse_proxy",
		"upstreams": []any{map[string]any{"dial": host}},
		"headers":   map[string]any{"request": map[string]any{"set": map[string]any{"Host": []any{"{http.reverse_proxy.upstream.hostport}"}}}},
	}}}}
}

func TestARouterSendsEachToolsCallsToItsOwnServer(t *testing.T) {
	calc, texts, rest := startSeenServer(t), startSeenServer(t), startSeenServer(t)
	gw := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{
		Site: "mcp\n" + mcptest.ProxyTo(rest.url),
		Handler: func(h map[string]any) {
			h["upstreams"] = map[string]any{"calc": proxyRoutes(calc.url), "texts": proxyRoutes(texts.url)}
			h["features"] = map[string]any{"test_route_by_tool": map[string]any{"tools": map[string]any{"add": "calc", "echo": "texts"}}}
		},
	})
	session, err := mcp.NewClient(&mcp.Implementation{Name: "routed", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer session.Close()

	res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"sum": 5.0}, res.StructuredContent)
	for _, text := range []string{"one", "two"} {
		res, err = session.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		require.NoError(t, err)
		assert.Equal(t, text, mcptest.TextOf(t, res))
	}
	// Under the name clients know it by, to the server that knows it as
	// add.
	res, err = session.CallTool(t.Context(), &mcp.CallToolParams{Name: "calc.add", Arguments: map[string]any{"a": 1, "b": 1}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"sum": 2.0}, res.StructuredContent)
	_, err = session.ListTools(t.Context(), nil)
	require.NoError(t, err)

	assert.Equal(t, 2, calc.calls())
	assert.Equal(t, 2, texts.calls())
	assert.Zero(t, rest.calls(), "no call went to the next handler")
	assert.Contains(t, rest.methods, "tools/list")
	assert.NotContains(t, calc.methods, "tools/list")
}
