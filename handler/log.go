package handler

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/logsample"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// logEvery is the least time between two lines of one kind of envelope
// (see envelopeKind). Ten seconds: the first envelope of a kind is logged
// at once, so that a new kind of trouble shows without delay; only the
// count of a kind that repeats waits, at most twice as long, while the
// metrics count every envelope as it is answered. Between two sweeps of
// the sampler, at most maxLogKinds kinds are taken in, and each writes two
// lines at most: a client that changes its key at every call costs the log
// about 2,000 lines every ten seconds, whatever its rate.
const logEvery = 10 * time.Second

// maxLogKinds bounds the kinds of envelopes counted at once, each of which
// holds a few hundred bytes at most; beyond it, a new kind is counted with
// the others of its code and limit or guard (envelopeKind.coarse).
const maxLogKinds = 1024

// envelopeKind is what makes two envelopes the same to the log: the first
// of a kind in an interval is logged, and the ones after it are counted,
// their number logged at the end of the interval (logsample).
type envelopeKind struct {
	level zapcore.Level
	code  envelope.Code
	// rule is who refused the request (a limit or the guard), and the key
	// it was refused under, as the log shows it.
	rule feature.Rule
	// upstream is the upstream the answer came from, if any.
	upstream string
	// message tells apart envelopes that no limit or guard gave (a body
	// refused for one reason or another, a tool that does not exist), cut
	// to maxEchoed bytes.
	message string
}

// coarse is the kind that counts k when no room is left for kinds: the
// same code, and the same limit or guard.
func (k envelopeKind) coarse() envelopeKind {
	return envelopeKind{level: k.level, code: k.code, rule: feature.Rule{Kind: k.rule.Kind, Name: k.rule.Name}}
}

// kindOf is the kind of the envelope env that answered x.
func (h *Handler) kindOf(x *exchange, env *envelope.Envelope, level zapcore.Level) envelopeKind {
	k := envelopeKind{level: level, code: env.Code, rule: x.refusedBy}
	switch {
	case k.rule.Kind == "":
		k.message = clip(env.Message)
	case !k.rule.Keyed:
		k.rule.Key = ""
	case h.LogKey:
		k.rule.Key = clip(k.rule.Key)
	default:
		k.rule.Key = feature.ShownKey(k.rule.Key)
	}
	if repl, ok := x.Request.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		k.upstream, _ = repl.GetString("http.reverse_proxy.upstream.hostport")
	}
	return k
}

// logEnvelope writes the log line of an envelope the gateway answered
// with, unless one of its kind was logged within logEvery: then it is only
// counted.
func (h *Handler) logEnvelope(x *exchange, env *envelope.Envelope) {
	level := logLevel(x, env)
	ce := h.logger.Check(level, "answered with an envelope")
	if ce == nil {
		return
	}
	kind := h.kindOf(x, env, level)
	log, overflow := h.logSampler.Note(kind, kind.coarse())
	if !log {
		return
	}
	fields := make([]zap.Field, 0, 13)
	fields = append(fields, zap.String("code", string(env.Code)))
	// Values the client chose are cut to maxEchoed bytes: a log line costs
	// no more than a bounded part of what the client sent.
	if len(x.Messages) > 0 {
		m := &x.Messages[0]
		fields = append(fields, zap.String("method", clip(string(m.Method))))
		if m.Name != nil {
			fields = append(fields, zap.String("tool", clip(string(m.Name))))
		}
		if m.ID != nil {
			fields = append(fields, zap.String("id", clip(idText(m.ID))))
		}
	}
	if x.Batch {
		fields = append(fields, zap.Int("batch_size", len(x.Messages)))
	}
	fields = kind.appendWho(fields)
	if env.HasRetryAfter() {
		fields = append(fields, zap.Int64("retry_after", env.RetryAfterSeconds()))
	}
	if kind.upstream != "" {
		fields = append(fields, zap.String("upstream", kind.upstream))
	}
	fields = append(fields, zap.Duration("duration", time.Since(x.Start)))
	if x.cause != nil {
		fields = append(fields, zap.Error(x.cause))
	}
	if overflow {
		fields = append(fields, zap.Bool("overflow", true))
	}
	ce.Write(fields...)
}

// siteLogSample is where a panic of writing a count, on the log sampler's
// timer, is recovered (package panics).
const siteLogSample = "log_sample"

// logRepeated writes the line of envelopes counted and not logged: their
// kind and how many. It runs on the sampler's timer, a goroutine of its
// own, or as the handler is cleaned up.
func (h *Handler) logRepeated(c logsample.Count[envelopeKind]) {
	defer panics.Recover(h.logger, siteLogSample)
	k := c.Kind
	ce := h.logger.Check(k.level, "answered with more envelopes of this kind")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 8)
	fields = append(fields, zap.String("code", string(k.code)))
	fields = k.appendWho(fields)
	if k.upstream != "" {
		fields = append(fields, zap.String("upstream", k.upstream))
	}
	if k.message != "" {
		fields = append(fields, zap.String("message", k.message))
	}
	fields = append(fields, zap.Int64("repeated", c.N))
	if c.Overflow {
		fields = append(fields, zap.Bool("overflow", true))
	}
	ce.Write(fields...)
}

// appendWho appends the fields that say who refused: the rule (a field
// named for its kind, "limit" or "guard", holding its name), and the key.
func (k *envelopeKind) appendWho(fields []zap.Field) []zap.Field {
	if k.rule.Kind != "" {
		fields = append(fields, zap.String(k.rule.Kind, k.rule.Name))
	}
	if k.rule.Keyed {
		fields = append(fields, zap.String("key", k.rule.Key))
	}
	return fields
}

// logLevel is the level an envelope deserves: the gateway applying its own
// policy (rate limits, the concurrency guard, the tool policy, refusing
// bad or foreign requests) is routine and logged at info; an upstream that
// is down, slow, failing or overloaded is a warning. The gateway answers
// UNKNOWN_ACTION only for a tool its policy hides, or one the tools listed
// lack.
func logLevel(x *exchange, env *envelope.Envelope) zapcore.Level {
	switch {
	case x.refusedBy.Kind != "":
		return zapcore.InfoLevel
	case env.Code == envelope.ValidationError || env.Code == envelope.Forbidden || env.Code == envelope.UnknownAction:
		return zapcore.InfoLevel
	}
	return zapcore.WarnLevel
}
