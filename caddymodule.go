// Package caddymcp is a Caddy plugin that fronts MCP (Model Context Protocol)
// servers. Importing it registers the http.handlers.mcp module and the mcp
// Caddyfile directive, ordered before reverse_proxy, and the mcp_credential
// directive (package credential) that follows it:
//
//	xcaddy build v2.11.9 --with github.com/caddymcp/caddy-mcp@v0.2.0
//
// The handler lives in package handler, the Caddyfile syntax in package
// caddyfile, the <tool_error> wire contract in package envelope, and the
// rate-limit store a fleet shares on Redis in package redisstore.
package caddymcp

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/caddymcp/caddy-mcp/caddyfile"
	_ "github.com/caddymcp/caddy-mcp/contract"   // registers the feature contract and the caddy mcp-lock command
	"github.com/caddymcp/caddy-mcp/credential"   // registers http.handlers.mcp_credential
	_ "github.com/caddymcp/caddy-mcp/federation" // registers the feature federation and the server blocks
	_ "github.com/caddymcp/caddy-mcp/guard"      // registers the feature concurrency
	_ "github.com/caddymcp/caddy-mcp/handler"    // registers http.handlers.mcp
	_ "github.com/caddymcp/caddy-mcp/limits"     // registers the feature rate_limits
	_ "github.com/caddymcp/caddy-mcp/oauth"      // registers the feature authorization
	_ "github.com/caddymcp/caddy-mcp/redisstore" // registers http.handlers.mcp.stores.redis
	_ "github.com/caddymcp/caddy-mcp/results"    // registers the feature results
	_ "github.com/caddymcp/caddy-mcp/session"    // registers the feature sessions and http.reverse_proxy.selection_policies.mcp_session
	_ "github.com/caddymcp/caddy-mcp/toolpolicy" // registers the feature tools
	_ "github.com/caddymcp/caddy-mcp/tracing"    // registers the feature tracing, on by default
	_ "github.com/caddymcp/caddy-mcp/validate"   // registers the feature validate
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("mcp", caddyfile.Parse)
	httpcaddyfile.RegisterDirectiveOrder("mcp", httpcaddyfile.Before, "reverse_proxy")
	// A server's credential, put on the request once mcp let it through:
	// registered after mcp, it comes between mcp and reverse_proxy.
	httpcaddyfile.RegisterHandlerDirective("mcp_credential", credential.ParseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("mcp_credential", httpcaddyfile.Before, "reverse_proxy")
}
