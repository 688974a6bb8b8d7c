// Package handler is the mcp HTTP handler (http.handlers.mcp): the one place
// where HTTP, JSON-RPC and Caddy meet. It inspects every JSON-RPC POST,
// admits it against the configured limits, and answers what it refuses with
// a <tool_error> envelope the model can act on. Everything else passes
// through to the next handler (normally reverse_proxy) byte for byte.
package handler

import (
	"cmp"
	"io"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/configs"
	"github.com/caddymcp/caddy-mcp/internal/envlog"
	"github.com/caddymcp/caddy-mcp/internal/failures"
	"github.com/caddymcp/caddy-mcp/internal/origin"
	"github.com/caddymcp/caddy-mcp/internal/own"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// DefaultMaxRequestBody is the default of Handler.MaxRequestBody: 4 MiB.
const DefaultMaxRequestBody = 4 << 20

// DefaultStreamAbove is the default of Handler.StreamAbove: 256 KiB.
// Below it, reading a body whole before it goes on adds under a
// millisecond end to end and saves a third of the CPU; above, the wait
// grows to tens of milliseconds (docs/performance.md has the figures).
const DefaultStreamAbove = 256 << 10

// DefaultMaxBatch is the default of Handler.MaxBatch.
const DefaultMaxBatch = 16

// Handler is the mcp middleware. It goes in front of reverse_proxy:
//
//	mcp {
//		rate_limit per_client {
//			rate 10/s
//		}
//	}
//	reverse_proxy 127.0.0.1:9000
type Handler struct {
	// MaxRequestBody is the largest POST body the handler reads, in bytes.
	// A larger body is refused with HTTP 413. Memory follows the bytes that
	// arrive, not the length a client declares. Default: 4 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	// ReadBodyTimeout is the longest the handler waits for a POST body to
	// arrive, from the moment it starts reading it. A body still incomplete
	// then is refused with HTTP 408 and the connection is closed, so that
	// slow clients cannot hold connections and buffers indefinitely.
	// Default: 10s.
	ReadBodyTimeout caddy.Duration `json:"read_body_timeout,omitempty"`

	// StreamAbove is the declared body length, in bytes, above which a
	// tools/call is admitted on its head and goes to the upstream as it
	// arrives, rather than being read whole first (handler/streaming.go).
	// Streaming gives the upstream the body sooner and costs CPU; set it
	// to max_request_body or more to read every body whole. Default: 256 KiB.
	StreamAbove int64 `json:"stream_above,omitempty"`

	// MaxBatch is the most JSON-RPC messages one POST may carry (MCP
	// 2025-03-26 allows batches, later versions forbid them). A larger
	// batch is refused with HTTP 400 and one envelope, before anything is
	// kept for its messages. Default: 16.
	MaxBatch int `json:"max_batch,omitempty"`

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

	// UpstreamCancelsOnClose says the upstream stops running a request of
	// MCP 2026-07-28 when its response stream closes, as that revision
	// specifies: a client that leaves then cancels its call upstream and
	// frees its guard places at once. Without it (the default, and always
	// for older versions), a call whose client left holds its places until
	// the upstream has answered, since servers such as the Go SDK's (unless
	// built with PropagateRequestCancellation) run it to its end anyway.
	UpstreamCancelsOnClose bool `json:"upstream_cancels_on_close,omitempty"`

	// SSEKeepalive is how long an event stream from the upstream (a GET
	// stream, or the answer to a long tool call) may stay idle before the
	// gateway sends an SSE comment line, which clients ignore, so that load
	// balancers and clients that cut idle connections keep it open. A
	// negative value turns it off. Default: 25s.
	SSEKeepalive caddy.Duration `json:"sse_keepalive,omitempty"`

	// Features are the handler's features, by name: modules of the
	// namespace http.handlers.mcp.features (package feature's Plugin),
	// whose parts run in the core's phases (handler/plugins.go):
	// "concurrency", "audit", and any other a build registers. Default:
	// none.
	FeaturesRaw caddy.ModuleMap `json:"features,omitempty" caddy:"namespace=http.handlers.mcp.features"`

	// Upstreams are named lists of Caddy routes, each with its own
	// reverse_proxy, that a guest feature's router (feature.Router) may
	// send a request to instead of the next handler (handler/route.go).
	// Default: none.
	Upstreams map[string]caddyhttp.RouteList `json:"upstreams,omitempty"`

	// LogKey shows rate-limit and guard keys as they are: in the log line
	// of a refused request, and in the admin API's /mcp/status. Keys can
	// hold secrets (tokens, addresses), so by default both show only a
	// short SHA-256 digest of them.
	LogKey bool `json:"log_key,omitempty"`

	origins origin.Policy
	// reopens are the sessions being reopened on this node (package own).
	reopens *own.Flights
	// failures words the upstream's failures.
	failures feature.Failures
	// The admitters of each phase (feature.Admitter): identity verifies
	// a request's credentials (the gate), openers open its session,
	// admitters take what it needs before the checks (the rate limits),
	// entries after them (the guard's places).
	identity, openers, admitters, entries []feature.Admitter
	// checks are the features' checks of a request on its way in, and
	// responders the features that read the upstream's answers, each in
	// the order they run.
	checks []feature.Check
	// annotators tell the model about a tool beside the gateway's answers
	// to a call to it.
	annotators []feature.Annotator
	// deadlines are the checks that bound how long a call runs.
	deadlines []feature.Deadline
	// governs: a check decides which calls run; wholeBody: one reads a
	// call's whole body (see feature.Governing, feature.WholeBody).
	governs, wholeBody bool
	responders         []feature.Responder
	// observers are told how each request ended; pluggedStatus are the
	// guest features' sections of /mcp/status (plugins.go).
	observers     []feature.Observer
	pluggedStatus []pluggedStatus
	// answerers may answer a request themselves, routers send it to one
	// of the Upstreams, rewriters rewrite its body (route.go).
	answerers []feature.Answerer
	routers   []feature.Router
	rewriters []feature.Rewriter
	// fronts answer before the origin check; closers are what the
	// features shared, closed with the handler (plugins.go).
	fronts  []feature.Front
	closers []io.Closer
	// keyInputs are the parts of a request key templates read, which a
	// request may give once at most.
	keyInputs feature.Inputs
	logger    *zap.Logger
	// envelopes logs the first envelope of each kind, and counts the
	// ones that repeat it (package envlog).
	envelopes *envlog.Log
	// joined is the state of the config this handler belongs to
	// (package internal/configs), until it is cleaned up.
	joined *configs.Load[*Handler]
	// tracer follows each request from its start (nil: none).
	tracer feature.Tracer
}

// loads are the live configs' states, each with its handlers, which
// /mcp/status lists. In a route's JSON, a handler is named "mcp".
var loads = configs.Registry[*Handler]{Name: "mcp"}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mcp",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets up the limits, taking their buckets from the ones that
// survive config reloads. What it takes, Cleanup gives back, also after a
// failed Provision or Validate (Caddy calls Cleanup then).
func (h *Handler) Provision(ctx caddy.Context) error {
	if h.logger == nil {
		h.logger = ctx.Logger()
	}
	h.envelopes = envlog.New(h.logger, h.LogKey)
	h.reopens = own.NewFlights()
	if err := registerMetrics(ctx); err != nil {
		return err
	}
	h.MaxRequestBody = cmp.Or(h.MaxRequestBody, DefaultMaxRequestBody)
	h.MaxBatch = cmp.Or(h.MaxBatch, DefaultMaxBatch)
	h.StreamAbove = cmp.Or(h.StreamAbove, DefaultStreamAbove)
	h.ReadBodyTimeout = cmp.Or(h.ReadBodyTimeout, caddy.Duration(DefaultReadBodyTimeout))
	h.SSEKeepalive = cmp.Or(h.SSEKeepalive, caddy.Duration(DefaultSSEKeepalive))
	h.UpstreamRetryAfter = cmp.Or(h.UpstreamRetryAfter, caddy.Duration(DefaultUpstreamRetryAfter))
	h.failures = &failures.Failures{RetryAfter: time.Duration(h.UpstreamRetryAfter)}
	h.joined = loads.Join(configs.ID(ctx))
	if err := h.joined.CheckRoutes(ctx); err != nil {
		return err
	}
	var err error
	if h.origins, err = origin.NewPolicy(h.AllowedOrigins); err != nil {
		return err
	}
	if err = h.provisionUpstreams(ctx); err != nil {
		return err
	}
	if err = h.loadPlugins(ctx); err != nil {
		return err
	}
	h.askFeatures()
	h.joined.AddLive(h)
	return nil
}

// Cleanup releases the buckets and guards this handler took; they live on
// while another config (the one replacing this one) still uses them. It
// leaves the handler's limits and guard in place: a reload cleans up the old
// config while its requests in flight finish within the grace period, and
// those requests go on using them (reading h.limits or h.concurrency while
// they are cleared would be a data race, and a request that found the guard
// gone would skip it). It logs the envelopes counted and not yet logged;
// those requests' envelopes are then each logged.
func (h *Handler) Cleanup() error {
	if h.joined != nil {
		h.joined.RemoveLive(h)
	}
	h.envelopes.Stop()
	h.closeShared()
	if h.joined != nil {
		// Last: the config's state goes with its last handler.
		h.joined.Leave()
		h.joined = nil
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
