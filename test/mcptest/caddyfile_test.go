package mcptest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

func TestFreeLoopbackAddrNeverGivesAnAddressTwice(t *testing.T) {
	seen := make(map[string]bool)
	for range 300 {
		addr := mcptest.FreeLoopbackAddr(t)
		require.False(t, seen[addr], "%s was handed out before", addr)
		seen[addr] = true
	}
}

func TestCaddyfileWritesTheSharedGlobalOptions(t *testing.T) {
	c := mcptest.Caddyfile{Storage: "/tmp/s", Sites: []mcptest.Site{
		{Address: "http://127.0.0.1:1", Body: "mcp {\n\tmax_batch 2\n}\nrespond ok"},
		{Address: "http://127.0.0.1:2", Body: "respond ok"},
	}}
	assert.Equal(t, `{
	admin off
	skip_install_trust
	auto_https off
	grace_period 1ns
	storage file_system "/tmp/s"
	log {
		level ERROR
	}
}

http://127.0.0.1:1 {
	mcp {
		max_batch 2
	}
	respond ok
}

http://127.0.0.1:2 {
	respond ok
}
`, c.String())

	c = mcptest.Caddyfile{
		Admin: "127.0.0.1:3", AutoHTTPS: "disable_redirects", DefaultBind: "127.0.0.1", GracePeriod: 10 * time.Second,
		Storage: "/tmp/s", Log: "output file /tmp/l\nformat json", Global: "servers {\n\ttrusted_proxies static 127.0.0.1/32\n}",
	}
	assert.Equal(t, `{
	admin 127.0.0.1:3
	skip_install_trust
	auto_https disable_redirects
	default_bind 127.0.0.1
	grace_period 10s
	storage file_system "/tmp/s"
	log {
		output file /tmp/l
		format json
	}
	servers {
		trusted_proxies static 127.0.0.1/32
	}
}
`, c.String())
	_, _, err := mcptest.Adapt(c.String())
	require.NoError(t, err)
}
