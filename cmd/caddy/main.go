// Command caddy is a Caddy binary with the standard modules and the mcp
// handler: what `go run ./cmd/caddy` starts during development.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddymcp/caddy-mcp"
)

func main() {
	caddycmd.Main()
}
