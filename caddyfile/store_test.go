package caddyfile

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/handler"
	_ "github.com/caddymcp/caddy-mcp/redisstore" // the store redis block
)

func TestStoreBlockIsTheBackendsOwn(t *testing.T) {
	input := `mcp {
		store redis {
			address    redis://10.0.0.5:6379/0 redis://10.0.0.6:6379/0
			username   {env.REDIS_USER}
			password   {env.REDIS_PASSWORD}
			key_prefix app:
			timeout    20ms
			on_error   deny
		}
	}`
	var cfg handler.Handler
	require.NoError(t, Unmarshal(caddyfile.NewTestDispenser(input), &cfg))
	assert.JSONEq(t, `{"backend":"redis","addresses":["redis://10.0.0.5:6379/0","redis://10.0.0.6:6379/0"],
		"username":"{env.REDIS_USER}","password":"{env.REDIS_PASSWORD}","key_prefix":"app:","timeout":20000000,"on_error":"deny"}`,
		string(rateLimits(t, &cfg).StoreRaw))
}

func TestStoreBlockErrorsNameTheirLine(t *testing.T) {
	for input, want := range map[string]string{
		"mcp {\n\tstore\n}":                  "store needs a backend",
		"mcp {\n\tstore memcached {\n\t}\n}": "http.handlers.mcp.stores.memcached",
		"mcp {\n\tstore redis {\n\t\taddress a:1\n\t\ton_error retry\n\t}\n}": `on_error "retry": want local, allow or deny`,
		"mcp {\n\tstore redis {\n\t\ton_error deny\n\t}\n}":                   "address: at least one is needed",
		"mcp {\n\tstore redis {\n\t\taddress a:1\n\t\ttimeout soon\n\t}\n}":   `timeout "soon"`,
		"mcp {\n\tstore redis {\n\t\taddress a:1\n\t\tdatabase 2\n\t}\n}":     `unrecognized store redis option "database", at Testfile:4`,
		"mcp {\n\tstore redis {\n\t\taddress a:1\n\t\tpasword x\n\t}\n}":      `unrecognized store redis option "pasword": did you mean "password"?, at Testfile:4`,
		"mcp {\n\tstore redis {\n\t\taddress a:1\n\t\taddress b:1\n\t}\n}":    "address given twice",
	} {
		var cfg handler.Handler
		err := Unmarshal(caddyfile.NewTestDispenser(input), &cfg)
		require.Error(t, err, input)
		assert.Contains(t, err.Error(), want, input)
	}
}
