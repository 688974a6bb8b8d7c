package handler

import (
	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/limits"
	"github.com/caddymcp/caddy-mcp/oauth"
	"github.com/caddymcp/caddy-mcp/session"
)

// The configuration of the features that are packages of their own, under
// the names the handler's fields give them.

// RateLimit is one named token-bucket limit (package limits).
type RateLimit = limits.Config

// DefaultKey is the default of RateLimit.Key: the client's address.
const DefaultKey = limits.DefaultKey

// Concurrency bounds the requests in flight to the upstream, with a queue
// (package guard).
type Concurrency = guard.Config

// DefaultCancelGrace is the default of Concurrency.CancelGrace.
const DefaultCancelGrace = guard.DefaultCancelGrace

// Sessions pins the sessions of MCP's 2025 revisions to the upstream that
// holds them (package session).
type Sessions = session.Config

// DefaultSessionTTL is the default of Sessions.TTL.
const DefaultSessionTTL = session.DefaultTTL

// Authorization makes the gateway the servers' OAuth 2.1 resource server
// (package oauth).
type Authorization = oauth.Config

// AuthorizationIssuer is one issuer whose tokens Authorization accepts.
type AuthorizationIssuer = oauth.IssuerConfig

// AuthorizationScopeRule gives the scopes a tool, prompt or resource needs.
type AuthorizationScopeRule = oauth.ScopeRule
