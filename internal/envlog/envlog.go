// Package envlog writes the log line of each envelope the gateway answers
// with: the first of each kind at once, then, for a kind that repeats, a
// count of the others once an interval is over (package logsample), so
// that a storm of refusals costs the log a bounded number of lines.
package envlog

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

// Every is the least time between two lines of one kind of envelope
// (see kind). Ten seconds: the first envelope of a kind is logged
// at once, so that a new kind of trouble shows without delay; only the
// count of a kind that repeats waits, at most twice as long, while the
// metrics count every envelope as it is answered. Between two sweeps of
// the sampler, at most MaxKinds kinds are taken in, and each writes two
// lines at most: a client that changes its key at every call costs the log
// about 2,000 lines every ten seconds, whatever its rate.
const Every = 10 * time.Second

// MaxKinds bounds the kinds of envelopes counted at once, each of which
// holds a few hundred bytes at most; beyond it, a new kind is counted with
// the others of its code and limit or guard (kind.coarse).
const MaxKinds = 1024

// kind is what makes two envelopes the same to the log: the first
// of a kind in an interval is logged, and the ones after it are counted,
// their number logged at the end of the interval (logsample).
type kind struct {
	level zapcore.Level
	code  envelope.Code
	// rule is who refused the request (a limit or the guard), and the key
	// it was refused under, as the log shows it.
	rule feature.Rule
	// upstream is the upstream the answer came from, if any.
	upstream string
	// message tells apart envelopes that no limit or guard gave (a body
	// refused for one reason or another, a tool that does not exist), cut
	// to feature.MaxEchoed bytes.
	message string
}

// Log writes the lines of one handler's envelopes.
type Log struct {
	logger *zap.Logger
	// logKey: the key a rule refused under is logged as it is (the
	// handler's log_key), not as feature.ShownKey shows it.
	logKey  bool
	sampler *logsample.Sampler[kind]
}

// New is the log of a handler's envelopes, written to logger.
func New(logger *zap.Logger, logKey bool) *Log {
	l := &Log{logger: logger, logKey: logKey}
	l.sampler = logsample.New(Every, MaxKinds, l.repeated)
	return l
}

// Stop writes the counts not written yet, and stops the sampler's timer.
func (l *Log) Stop() { l.sampler.Stop() }

// coarse is the kind that counts k when no room is left for kinds: the
// same code, and the same limit or guard.
func (k kind) coarse() kind {
	return kind{level: k.level, code: k.code, rule: feature.Rule{Kind: k.rule.Kind, Name: k.rule.Name}}
}

// kindOf is the kind of the envelope env that answered x, refused by rule.
func (l *Log) kindOf(x *feature.Exchange, env *envelope.Envelope, rule feature.Rule, level zapcore.Level) kind {
	k := kind{level: level, code: env.Code, rule: rule}
	switch {
	case k.rule.Kind == "":
		k.message = feature.Clip(env.Message)
	case !k.rule.Keyed:
		k.rule.Key = ""
	case l.logKey:
		k.rule.Key = feature.Clip(k.rule.Key)
	default:
		k.rule.Key = feature.ShownKey(k.rule.Key)
	}
	if repl, ok := x.Request.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		k.upstream, _ = repl.GetString("http.reverse_proxy.upstream.hostport")
	}
	return k
}

// Write writes the log line of the envelope env the gateway answered x
// with, refused by rule (none: the gateway answered for the upstream or
// refused the body), for cause (nil: none), unless one of its kind was
// logged within Every: then it is only counted.
func (l *Log) Write(x *feature.Exchange, env *envelope.Envelope, rule feature.Rule, cause error) {
	level := levelOf(rule, env)
	ce := l.logger.Check(level, "answered with an envelope")
	if ce == nil {
		return
	}
	kind := l.kindOf(x, env, rule, level)
	log, overflow := l.sampler.Note(kind, kind.coarse())
	if !log {
		return
	}
	fields := make([]zap.Field, 0, 13)
	fields = append(fields, zap.String("code", string(env.Code)))
	// Values the client chose are cut to feature.MaxEchoed bytes: a log line costs
	// no more than a bounded part of what the client sent.
	if len(x.Messages) > 0 {
		m := &x.Messages[0]
		fields = append(fields, zap.String("method", feature.Clip(string(m.Method))))
		if m.Name != nil {
			fields = append(fields, zap.String("tool", feature.Clip(string(m.Name))))
		}
		if m.ID != nil {
			fields = append(fields, zap.String("id", feature.Clip(feature.IDText(m.ID))))
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
	if cause != nil {
		fields = append(fields, zap.Error(cause))
	}
	if overflow {
		fields = append(fields, zap.Bool("overflow", true))
	}
	ce.Write(fields...)
}

// PanicSite is where a panic of writing a count, on the log sampler's
// timer, is recovered (package panics).
const PanicSite = "log_sample"

// repeated writes the line of envelopes counted and not logged: their
// kind and how many. It runs on the sampler's timer, a goroutine of its
// own, or as the handler is cleaned up.
func (l *Log) repeated(c logsample.Count[kind]) {
	defer panics.Recover(l.logger, PanicSite)
	k := c.Kind
	ce := l.logger.Check(k.level, "answered with more envelopes of this kind")
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
func (k *kind) appendWho(fields []zap.Field) []zap.Field {
	if k.rule.Kind != "" {
		fields = append(fields, zap.String(k.rule.Kind, k.rule.Name))
	}
	if k.rule.Keyed {
		fields = append(fields, zap.String("key", k.rule.Key))
	}
	return fields
}

// levelOf is the level an envelope deserves: the gateway applying its own
// policy (rate limits, the concurrency guard, the tool policy, refusing
// bad or foreign requests) is routine and logged at info; an upstream that
// is down, slow, failing or overloaded is a warning. The gateway answers
// UNKNOWN_ACTION only for a tool its policy hides, or one the tools listed
// lack.
func levelOf(rule feature.Rule, env *envelope.Envelope) zapcore.Level {
	switch {
	case rule.Kind != "":
		return zapcore.InfoLevel
	case env.Code == envelope.ValidationError || env.Code == envelope.Forbidden || env.Code == envelope.UnknownAction:
		return zapcore.InfoLevel
	}
	return zapcore.WarnLevel
}
