// Command caddy is Caddy with the standard modules, the mcp handler, and
// the audit feature: the one import line a build adds to take a feature
// from outside the core.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddymcp/caddy-mcp"
	_ "github.com/caddymcp/caddy-mcp/examples/feature-audit"
)

func main() {
	caddycmd.Main()
}
