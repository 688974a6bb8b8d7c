package mcptest

import "testing"

// StartCatchAllGateway runs Caddy like StartGateway, but with site as the
// body of a catch-all site, "http://:PORT" bound to 127.0.0.1, and returns
// "http://127.0.0.1:PORT".
//
// StartGateway's site address, "http://127.0.0.1:PORT", makes Caddy match
// the Host header: a request with another Host (a DNS rebinding attempt,
// "Host: evil.example.com") matches no site and gets Caddy's empty 200
// without reaching the mcp handler. A catch-all site hands every Host to the
// handlers, as a gateway listening on ":PORT" does.
func StartCatchAllGateway(t testing.TB, site string) string {
	t.Helper()
	return start(t, GatewayConfig{Site: site}, true).URL
}
