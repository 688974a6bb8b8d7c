package handler

import "github.com/caddymcp/caddy-mcp/ratelimit"

// SharedStore is a module of the http.handlers.mcp.stores namespace: where
// the rate limits' buckets live when every node of a fleet must share them
// (package redisstore is one). Without one, each node keeps its own.
type SharedStore interface {
	// Store returns the buckets of the named limit. local is the node's own
	// store for the limit, which the shared store may decide with when it
	// cannot decide itself.
	Store(limit string, local ratelimit.Store) ratelimit.Store
	// Status describes the store and its health, for /mcp/status.
	Status() any
}
