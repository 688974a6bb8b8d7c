package handler

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// Cancellations: how the gateway tells the upstream to stop requests it
// forwarded, when their deadline passed (deadline.go) or their client left
// holding places (answer.Abandonment). From MCP 2026-07-28 on, closing a request's
// stream, which cutting the upstream request does, is the cancellation.
// Before it, closing means nothing: the gateway sends notifications/cancelled
// for each request of the body, on its session, through the rest of the
// route, so that it reaches the replica the session is pinned to.

// cancelTimeout bounds the wait for the upstream to take a cancellation.
const cancelTimeout = 5 * time.Second

// siteCancellation is where a panic of the route on a cancellation is
// recovered (package panics).
const siteCancellation = "cancellation"

// Why a request was cancelled, as the upstream is told, and as the
// cancellations metric counts it.
const (
	reasonDeadline   = "the gateway's deadline for this tool passed"
	reasonClientLeft = "the client left"
	reasonUnread     = "the gateway stopped reading the answer: it is larger than the gateway reads"

	reasonLabelDeadline   = "deadline"
	reasonLabelClientLeft = "client_left"
	reasonLabelUnread     = "answer_unread"
)

// sendCancelled sends notifications/cancelled for each request of x, one
// POST each (batches are gone from MCP since 2025-06-18). vars are the
// variables of x's request as it went upstream: each notification goes
// through the route on a request of its own, with its own replacer and
// variables, since x's may still be on its way, and the route writes to
// those. Its placeholders read x's messages, as x's did.
func (h *Handler) sendCancelled(x *exchange, header http.Header, vars map[string]any, next caddyhttp.Handler, reason string) {
	if x.Era.ClosingCancels() {
		return
	}
	for i := range x.Messages {
		if m := &x.Messages[i]; m.Kind == jsonrpc.Request {
			h.sendOwn(x, header, vars, next, own.Cancelled(m.ID, reason))
		}
	}
}

// sendOwn sends body through next as a POST of x's session, and drops the
// answer. No panic of the route goes past it: net/http would not recover
// it on a goroutine of the gateway's (answer.Abandonment), and on the request's
// it would abort a connection whose client has its answer (deadline.go).
// reverse_proxy panics with http.ErrAbortHandler when the upstream breaks
// its answer, which is logged at debug.
func (h *Handler) sendOwn(x *exchange, header http.Header, vars map[string]any, next caddyhttp.Handler, body []byte) {
	defer panics.Recover(h.logger, siteCancellation)
	ctx, stop := context.WithTimeout(context.WithoutCancel(x.Request.Context()), cancelTimeout)
	defer stop()
	// header, not the request's own, which the request's goroutine may
	// be writing meanwhile (a session reopened).
	sink := &own.Discard{}
	r, repl := own.Prepare(own.Post(ctx, x.Request, header, body), vars, sink)
	mine := &exchange{Exchange: feature.Exchange{Request: r, Start: x.Start, Era: x.Era, Messages: x.Messages, Batch: x.Batch}}
	repl.Map(mine.placeholder)
	if err := next.ServeHTTP(sink, r); err != nil || sink.Status() >= 300 {
		h.logger.Debug("notifications/cancelled not taken by the upstream", zap.Int("status", sink.Status()), zap.Error(err))
	}
}

// detach cuts the upstream request of x, which holds places, loose from
// its client (answer.Abandonment): when the client leaves, the upstream is
// told to stop the request under x's header and variables as they are now
// (a reopen rewrites the header on the request's goroutine meanwhile, the
// route its variables).
func (h *Handler) detach(x *exchange, u *answer.Watch, next caddyhttp.Handler, grace time.Duration) (*answer.Abandonment, context.Context) {
	header, vars := x.Request.Header, own.Vars(x.Request)
	if u.Reopen != nil {
		header = header.Clone()
	}
	return u.Detach(x.Request.Context(), grace, x.Era.ClosingCancels(), func(send bool) {
		cancellations.WithLabelValues(reasonLabelClientLeft).Inc()
		if send {
			h.sendCancelled(x, header, vars, next, reasonClientLeft)
		}
	})
}
