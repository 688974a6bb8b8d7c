package federation

import (
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
)

// credentialHandler stands for an mcp_credential handler in a route.
type credentialHandler struct {
	caddyhttp.MiddlewareHandler
	use string
}

func (c credentialHandler) Credential() (string, string) { return c.use, "" }

func routesWith(use string) caddyhttp.RouteList {
	if use == "" {
		return caddyhttp.RouteList{{}}
	}
	inner := caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{credentialHandler{use: use}}}}
	return caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{Routes: inner}}}}
}

// With authorization, a server must be given a credential of its own:
// one that names none, or passes the caller's token through, is refused
// at load, saying why; a token exchange without authorization too.
func TestEachServerMustNameACredentialOfItsOwn(t *testing.T) {
	for use, want := range map[string]string{
		"":               "the caller's token is for the gateway, not for this server",
		"passthrough":    "MCP authorization forbids token passthrough",
		"token_exchange": "",
		"header":         "",
		"none":           "",
	} {
		err := checkCredentials(&Server{Name: "crm", Routes: routesWith(use)}, true)
		if want == "" {
			assert.NoError(t, err, use)
		} else {
			assert.ErrorContains(t, err, want, use)
			assert.ErrorContains(t, err, `server "crm"`)
		}
	}
	assert.NoError(t, checkCredentials(&Server{Name: "crm", Routes: routesWith("")}, false))
	assert.ErrorContains(t, checkCredentials(&Server{Name: "crm", Routes: routesWith("token_exchange")}, false), "configure authorization")
}
