package handler

import "github.com/caddymcp/caddy-mcp/session"

// Sessions pins the sessions of MCP's 2025 revisions to the upstream that
// holds them (package session).
type Sessions = session.Config

// DefaultSessionTTL is the default of Sessions.TTL.
const DefaultSessionTTL = session.DefaultTTL

// SessionsStatus is the sessions in the status view.
type SessionsStatus = session.Status
