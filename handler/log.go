package handler

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// logEnvelope writes the one log line of an envelope the gateway answered
// with.
func (h *Handler) logEnvelope(x *exchange, env *envelope.Envelope) {
	ce := h.logger.Check(logLevel(x, env), "answered with an envelope")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 12)
	fields = append(fields, zap.String("code", string(env.Code)))
	// Values the client chose are cut to maxEchoed bytes: a log line costs
	// no more than a bounded part of what the client sent.
	if len(x.msgs) > 0 {
		m := &x.msgs[0]
		fields = append(fields, zap.String("method", clip(string(m.Method))))
		if m.Name != nil {
			fields = append(fields, zap.String("tool", clip(string(m.Name))))
		}
		if m.ID != nil {
			fields = append(fields, zap.String("id", clip(idText(m.ID))))
		}
	}
	if x.batch {
		fields = append(fields, zap.Int("batch_size", len(x.msgs)))
	}
	if x.refusal.limit != "" {
		fields = append(fields, zap.String("limit", x.refusal.limit))
	}
	if x.refusal.guard != "" {
		fields = append(fields, zap.String("guard", x.refusal.guard))
	}
	if x.refusal.limit != "" || (x.refusal.guard != "" && h.concurrency.key != nil) {
		key := shownKey(x.refusal.key)
		if h.LogKey {
			key = clip(x.refusal.key)
		}
		fields = append(fields, zap.String("key", key))
	}
	if env.HasRetryAfter() {
		fields = append(fields, zap.Int64("retry_after", env.RetryAfterSeconds()))
	}
	if repl, ok := x.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		if up, _ := repl.GetString("http.reverse_proxy.upstream.hostport"); up != "" {
			fields = append(fields, zap.String("upstream", up))
		}
	}
	fields = append(fields, zap.Duration("duration", time.Since(x.start)))
	if x.cause != nil {
		fields = append(fields, zap.Error(x.cause))
	}
	ce.Write(fields...)
}

// logLevel is the level an envelope deserves: the gateway applying its own
// policy (rate limits, the concurrency guard, refusing bad or foreign
// requests) is routine and logged at info; an upstream that is down, slow,
// failing or overloaded is a warning.
func logLevel(x *exchange, env *envelope.Envelope) zapcore.Level {
	switch {
	case x.refusal.limit != "" || x.refusal.guard != "":
		return zapcore.InfoLevel
	case env.Code == envelope.ValidationError || env.Code == envelope.Forbidden:
		return zapcore.InfoLevel
	}
	return zapcore.WarnLevel
}
