package configs

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fake stands for a handler the registry lists: in a route, a provisioned
// one.
type fake struct{ name string }

func (*fake) ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error { return nil }

func TestTwoMCPHandlersOnOneRequestPathAreFound(t *testing.T) {
	const (
		mcp   = `{"handler":"mcp"}`
		proxy = `{"handler":"reverse_proxy"}`
	)
	sub := func(routes string) string { return `{"handler":"subroute","routes":[` + routes + `]}` }
	route := func(match string, handlers ...string) string {
		r := `{"handle":[` + strings.Join(handlers, ",") + `]`
		if match != "" {
			r += `,"match":[{"path":["` + match + `"]}]`
		}
		return r + "}"
	}
	for _, tt := range []struct {
		name   string
		routes string
		twice  bool
	}{
		{"one mcp", route("", mcp, proxy), false},
		{"two in one site", route("", mcp) + "," + route("", mcp, proxy), true},
		{"two in one route", route("", mcp, mcp, proxy), true},
		{"one in a route block below one at the top", route("", mcp) + "," + route("", sub(route("", mcp, proxy))), true},
		{"one in a handle block and one at the top", route("/x", sub(route("", mcp))) + "," + route("", mcp, proxy), true},
		{"one per handle block", route("/a", sub(route("", mcp, proxy))) + "," + route("/b", sub(route("", mcp, proxy))), false},
		{"two in one handle block", route("/a", sub(route("", mcp)+","+route("", mcp, proxy))), true},
	} {
		var routes caddyhttp.RouteList
		require.NoError(t, json.Unmarshal([]byte("["+tt.routes+"]"), &routes), tt.name)
		_, err := unconditionalMCP[*fake](routes, "mcp")
		if tt.twice {
			assert.ErrorIs(t, err, errDuplicateMCP, tt.name)
		} else {
			assert.NoError(t, err, tt.name)
		}
	}
}

// Routes Caddy has provisioned hold handlers rather than their JSON: an H
// is counted, and a subroute's routes are read.
func TestProvisionedHandlersAreCounted(t *testing.T) {
	matched := caddyhttp.RawMatcherSets{{"path": json.RawMessage(`["/a"]`)}}
	sub := func(routes ...caddyhttp.Route) caddyhttp.MiddlewareHandler {
		return &caddyhttp.Subroute{Routes: routes}
	}
	one := caddyhttp.RouteList{
		{MatcherSetsRaw: matched, Handlers: []caddyhttp.MiddlewareHandler{sub(caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&fake{}}})}},
		{MatcherSetsRaw: matched, Handlers: []caddyhttp.MiddlewareHandler{&fake{}}},
	}
	n, err := unconditionalMCP[*fake](one, "mcp")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one per handle block")

	twice := caddyhttp.RouteList{
		{Handlers: []caddyhttp.MiddlewareHandler{&fake{}}},
		{Handlers: []caddyhttp.MiddlewareHandler{sub(caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&fake{}}})}},
	}
	_, err = unconditionalMCP[*fake](twice, "mcp")
	assert.ErrorIs(t, err, errDuplicateMCP, "one in a route block below one at the top")
	assert.Equal(t, "two mcp handlers handle the same requests (two mcp blocks in one site, say): each would read and count every request; merge them into one mcp block, or give them matchers that tell their requests apart", err.Error())
}
