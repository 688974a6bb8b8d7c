package handler

import "github.com/caddymcp/caddy-mcp/guard"

// Concurrency bounds the requests in flight to the upstream, with a queue
// (package guard).
type Concurrency = guard.Config

// DefaultCancelGrace is the default of Concurrency.CancelGrace.
const DefaultCancelGrace = guard.DefaultCancelGrace
