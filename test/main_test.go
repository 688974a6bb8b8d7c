// Package test holds the integration tests: a real Caddy with the mcp
// handler, in front of a real MCP server built on the official Go SDK, driven
// by the official Go and TypeScript SDK clients and by raw HTTP.
package test

import (
	"testing"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

func TestMain(m *testing.M) { mcptest.Main(m) }
