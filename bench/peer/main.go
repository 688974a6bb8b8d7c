// Command peer is the benchmark's Caddy when it measures the peer: the
// standard modules, the mcp handler, and mholt/caddy-ratelimit, the Caddy
// plugin a user would pick instead, in one binary, so that the gateway and
// the peer are measured in the same Caddy. It is a module of its own, so
// that the peer never reaches the plugin's go.mod; `go run ./bench` builds
// it when a peer configuration is selected.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mholt/caddy-ratelimit"

	_ "github.com/caddymcp/caddy-mcp"
)

func main() {
	caddycmd.Main()
}
