package feature

import (
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// Tracer follows each request from its start (tracing: a span per
// message): the core tells the Trace it starts of each of its steps, the
// phases of admission and the upstream's answer, and gives it the answer
// to read and the body going upstream to carry its context. A handler has
// one tracer at most (Parts.Tracer).
type Tracer interface {
	// Start is the trace of x, once its body was read (x.Messages, and
	// x.Body unless it streams on to the upstream), or nil when x is not
	// traced: then nothing more is asked of it, so that a request not
	// traced costs what Start costs. It is called for each POST whose
	// body the core read.
	Start(x *Exchange) Trace
}

// SpanVar names the request variable (caddyhttp.GetVar) where the tracer
// leaves the span of a request of one message while Caddy traces it: an
// OpenTelemetry trace.Span, which a feature that answers the message, or
// keeps what it made, may link to or from. A request of several messages,
// or one not traced, has none.
const SpanVar = "caddy_mcp.span"

// Trace is one request's, told of its steps as they pass. Its methods
// may be called from the request's goroutine and from the answer's at
// once (a client that left while the upstream answered).
type Trace interface {
	// Phase: the request went through the phase p, which took took; a
	// phase that has no feature to run is not told.
	Phase(p Phase, took time.Duration)
	// Upstream: the upstream's answer began, with a header of status.
	Upstream(status int)
	// Answered: the gateway answered with env, for the messages not
	// answered otherwise, refused by the rule by (zero when no rule
	// refused).
	Answered(env *envelope.Envelope, by Rule)
	// Answer is the hook that reads the answer (nil: none), opened after
	// every other, so that it sees what the client is sent.
	Answer() Hook
	// AppendBody appends body (the request's, as the client sent it) to
	// dst, which has room for body and SpliceRoom per message, with the
	// trace's context spliced in, for the upstream, and reports whether it
	// changed anything. The rewriters are given what it made.
	AppendBody(dst, body []byte) ([]byte, bool)
	// Finish: the request is over for the gateway, at now. It is called
	// once, after what the admitters took was given back.
	Finish(now time.Time)
}

// SpliceRoom is the room the core gives a Trace's AppendBody for each
// message, beside the body: "params", "_meta", a traceparent (55 bytes)
// and a tracestate (at most 512 bytes, by W3C Trace Context). What needs
// more grows the buffer.
const SpliceRoom = 640

// Phase is a phase of admission a request goes through, which its Trace
// is told of with the time it took.
type Phase uint8

const (
	// PhaseSession: its session was opened (a sealed session id checked,
	// its replica restored).
	PhaseSession Phase = iota + 1
	// PhaseAdmission: the admission phase's admitters decided (the rate
	// limits).
	PhaseAdmission
	// PhaseChecks: the checks ran.
	PhaseChecks
	// PhaseEntry: the entry phase's admitters decided (a place in the
	// concurrency guard given or refused, a wait in its queue included).
	PhaseEntry
)
