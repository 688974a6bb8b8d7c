package mcptest

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// StartCatchAllGateway runs Caddy like StartGateway, but with site as the
// body of a catch-all site, "http://:PORT" bound to 127.0.0.1, and returns
// "http://127.0.0.1:PORT". It cannot be reloaded.
//
// StartGateway's site address, "http://127.0.0.1:PORT", makes Caddy match
// the Host header: a request with another Host (a DNS rebinding attempt,
// "Host: evil.example.com") matches no site and gets Caddy's empty 200
// without reaching the mcp handler. A catch-all site hands every Host to the
// handlers, as a gateway listening on ":PORT" does.
func StartCatchAllGateway(t testing.TB, site string) string {
	t.Helper()
	gatewayMu.Lock()
	addr := FreeLoopbackAddr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		gatewayMu.Unlock()
		t.Fatalf("mcptest: %v", err)
	}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("mcptest: stopping caddy: %v", err)
		}
		gatewayMu.Unlock()
	})
	cfg := fmt.Sprintf(`{
	admin off
	skip_install_trust
	auto_https off
	default_bind 127.0.0.1
	grace_period 1ns
	storage file_system %q
	log {
		level ERROR
	}
}

http://:%s {
	%s
}
`, t.TempDir(), port, strings.ReplaceAll(site, "\n", "\n\t"))
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		t.Fatalf("mcptest: adapting Caddyfile: %v\n%s", err, cfg)
	}
	if err := caddy.Load(adapted, true); err != nil {
		t.Fatalf("mcptest: loading config: %v\n%s", err, cfg)
	}
	return "http://" + addr
}
