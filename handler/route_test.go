package handler

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
)

// The seam several servers behind one endpoint rest on: two upstream
// routes behind one handler, each a Caddy route with its own
// reverse_proxy to a server of its own, and a feature, built only here,
// that routes a tools/call by its tool's name: "github.search" to the
// route github, "jira.search" to jira, anything else to the next handler.
func init() {
	caddy.RegisterModule(byToolPrefix{})
}

type byToolPrefix struct{}

func (byToolPrefix) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: feature.Namespace + ".test_router", New: func() caddy.Module { return byToolPrefix{} }}
}

func (r byToolPrefix) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Router: r}, nil
}

func (byToolPrefix) Route(x *feature.Exchange) string {
	m := x.Single()
	if m == nil || !feature.IsCall(m) {
		return ""
	}
	server, _, ok := strings.Cut(string(m.Name), ".")
	if !ok {
		return ""
	}
	return server
}

// namedRoute is an upstream route that answers with a result naming it.
func namedRoute(t *testing.T, name string) caddyhttp.RouteList {
	raw, err := json.Marshal(map[string]any{
		"handler": "static_response",
		"headers": map[string][]string{"Content-Type": {"application/json"}},
		"body":    fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":%q}]}}`, name),
	})
	require.NoError(t, err)
	return caddyhttp.RouteList{{HandlersRaw: []json.RawMessage{raw}}}
}

// The router's seam in the handler: a route named is served by its
// routes, one not named by the next handler, and one the handler lacks
// is answered with an envelope (test/route_test.go routes to real
// servers through reverse_proxy).
func TestARouterSendsEachCallToTheUpstreamRouteItNames(t *testing.T) {
	h := provision(t, &Handler{
		Upstreams:   map[string]caddyhttp.RouteList{"github": namedRoute(t, "github"), "jira": namedRoute(t, "jira")},
		FeaturesRaw: guests(t, map[string]any{"feature": "test_router"}),
	})
	call := func(tool string) (*httptest.ResponseRecorder, *upstream) {
		next := &upstream{}
		w := httptest.NewRecorder()
		require.NoError(t, h.ServeHTTP(w, post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`"}}`), next))
		return w, next
	}
	for tool, want := range map[string]string{"github.search": "github", "jira.search": "jira", "jira.create": "jira"} {
		w, next := call(tool)
		assert.Contains(t, w.Body.String(), `"text":"`+want+`"`, tool)
		assert.Zero(t, next.calls, tool)
	}

	_, next := call("search")
	assert.Equal(t, 1, next.calls, "no route named: the next handler")

	w, next := call("confluence.search")
	assert.Zero(t, next.calls)
	assert.Contains(t, w.Body.String(), `no upstream route named \"confluence\"`)
	assert.Contains(t, w.Body.String(), `"isError":true`)
}
