// Package handler is the mcp HTTP handler (http.handlers.mcp): the one place
// where HTTP, JSON-RPC and Caddy meet. It inspects every JSON-RPC POST,
// admits it against the configured limits, and answers what it refuses with
// a <tool_error> envelope the model can act on. Everything else passes
// through to the next handler (normally reverse_proxy) byte for byte.
package handler

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// DefaultMaxRequestBody is the default of Handler.MaxRequestBody: 4 MiB.
const DefaultMaxRequestBody = 4 << 20

// Handler is the mcp middleware. It goes in front of reverse_proxy:
//
//	mcp {
//		rate_limit per_client {
//			rate 10/s
//		}
//	}
//	reverse_proxy 127.0.0.1:9000
type Handler struct {
	// RateLimits are token-bucket limits by name. A message is admitted only
	// if every limit that applies to it has tokens; a message refused by one
	// limit takes no token from any other. A name identifies the buckets
	// across config reloads and across sites: two handlers that use the same
	// name and key template share buckets.
	RateLimits map[string]*RateLimit `json:"rate_limits,omitempty"`

	// Concurrency bounds the requests in flight to the upstream; requests
	// beyond it wait in a queue or are refused with SERVER_BUSY.
	Concurrency *Concurrency `json:"concurrency,omitempty"`

	// MaxRequestBody is the largest POST body the handler reads, in bytes.
	// A larger body is refused with HTTP 413. Default: 4 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	// AllowedOrigins are the web origins (scheme://host[:port]) whose pages
	// may call the MCP server; "*" allows any. A request with an Origin
	// header that is not allowed gets HTTP 403 before anything else
	// happens; a request without one (what MCP clients send) is always
	// allowed. Default: loopback origins only (http://localhost:PORT,
	// http://127.0.0.1:PORT), which defeats DNS rebinding.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`

	// UpstreamRetryAfter is the delay the model is told to wait when the
	// MCP server cannot be reached, or broke a streamed answer. Default: 30s.
	UpstreamRetryAfter caddy.Duration `json:"upstream_retry_after,omitempty"`

	// SSEKeepalive is how long an event stream from the upstream (a GET
	// stream, or the answer to a long tool call) may stay idle before the
	// gateway sends an SSE comment line, which clients ignore, so that load
	// balancers and clients that cut idle connections keep it open. A
	// negative value turns it off. Default: 25s.
	SSEKeepalive caddy.Duration `json:"sse_keepalive,omitempty"`

	// LogKey adds the rate-limit or guard key to the log line of a refused
	// request. Keys can hold secrets (tokens, addresses), so they are left
	// out unless asked for.
	LogKey bool `json:"log_key,omitempty"`

	origins     originPolicy
	limits      []*limit
	concurrency *concurrencyGuard
	logger      *zap.Logger
	// released: Cleanup (or a failed Provision) gave back the pools' shares.
	released bool
	// now is the clock; tests replace it.
	now func() time.Time
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mcp",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets up the limits, taking their buckets from the ones that
// survive config reloads.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if err := registerMetrics(ctx); err != nil {
		return err
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.MaxRequestBody == 0 {
		h.MaxRequestBody = DefaultMaxRequestBody
	}
	if h.SSEKeepalive == 0 {
		h.SSEKeepalive = caddy.Duration(DefaultSSEKeepalive)
	}
	if h.UpstreamRetryAfter == 0 {
		h.UpstreamRetryAfter = caddy.Duration(DefaultUpstreamRetryAfter)
	}
	var err error
	if h.origins, err = newOriginPolicy(h.AllowedOrigins); err != nil {
		return err
	}
	for _, name := range sortedNames(h.RateLimits) {
		l, err := newLimit(name, h.RateLimits[name], h.now)
		if err != nil {
			h.releaseLimits()
			return fmt.Errorf("rate_limit %q: %w", name, err)
		}
		h.limits = append(h.limits, l)
	}
	if h.Concurrency != nil {
		if h.concurrency, err = newConcurrencyGuard(h.Concurrency); err != nil {
			h.releaseLimits()
			return fmt.Errorf("concurrency: %w", err)
		}
	}
	addLive(h)
	return nil
}

// Validate checks the configuration.
func (h *Handler) Validate() error {
	if h.MaxRequestBody < 0 {
		return fmt.Errorf("max_request_body: %d is negative", h.MaxRequestBody)
	}
	if h.UpstreamRetryAfter < 0 {
		return fmt.Errorf("upstream_retry_after: %s is negative", time.Duration(h.UpstreamRetryAfter))
	}
	return nil
}

// Cleanup releases the buckets and guards this handler took; they live on
// while another config (the one replacing this one) still uses them.
func (h *Handler) Cleanup() error {
	removeLive(h)
	h.releaseLimits()
	return nil
}

// releaseLimits gives back the handler's shares of the buckets and guards,
// once. It leaves the handler's limits and guard in place: a reload cleans
// up the old config while its requests in flight finish within the grace
// period, and those requests go on using them (reading h.limits or
// h.concurrency while they are cleared would be a data race, and a request
// that found the guard gone would skip it).
func (h *Handler) releaseLimits() {
	if h.released {
		return
	}
	h.released = true
	for _, l := range h.limits {
		l.release()
	}
	if h.concurrency != nil {
		h.concurrency.release()
	}
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
