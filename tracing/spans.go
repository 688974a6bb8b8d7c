// Package tracing gives each MCP message the gateway reads a span of its
// own, by the OpenTelemetry semantic conventions for MCP
// (open-telemetry/semantic-conventions, docs/gen-ai/mcp.md at 04f1672,
// status Development): where Caddy's tracing directive traces a request,
// each JSON-RPC request and notification of its body gets a span of kind
// SERVER, a child of the trace context the message carries in
// params._meta, or else of Caddy's HTTP span (linked when it is not the
// parent). The span ends when the message's response has been written,
// or the gateway's envelope for it, or the answer ended without it; its
// status and error.type say how it ended. The upstream is sent each
// span's context in params._meta, so that an MCP server that reads it
// continues the trace.
//
// It is a feature of the mcp handler that every handler loads (Feature,
// feature.go, on by default): the core tells the spans of each step of a
// request (feature.Trace). Where Caddy does not trace the request (no
// tracing directive, or a trace not sampled), nothing is done: one
// context lookup.
package tracing

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/keys"
)

// Instrumentation is the name of the gateway's tracer.
const Instrumentation = "github.com/caddymcp/caddy-mcp"

// Spans are the spans of one request's messages. The zero of a pointer
// (nil) is a request not traced: every method does nothing.
type Spans struct {
	// mu: the answer's goroutine reads the answer while the request's
	// may finish (a client that left).
	mu    sync.Mutex
	msgs  []message
	tools *Tools
	// one holds the message of a body of one, in the same allocation.
	one [1]message
	// splice: the body was read, and holds requests and notifications
	// only, each with a span: the upstream is sent each one's context.
	splice bool
	// outcome is the gateway's envelope for the messages not answered
	// otherwise, once it wrote one; ending how the answer ended.
	envelope *envelope.Envelope
	rule     feature.Rule
	ending   feature.Ending
	ended    bool
	// x is the request's exchange: the server it went to, once the
	// session phase wrote it, is put on the spans (serverOnce).
	x         *feature.Exchange
	serverSet bool
}

// message is one message's span.
type message struct {
	span   trace.Span
	id     string // the request's id as sent; "" for a notification
	method string // as a metric's label
	tool   string // the tool a tools/call names
	start  time.Time
	done   bool
	// carrier is where the message holds trace context in the body.
	carrier jsonrpc.Carrier
}

var (
	propagator   = propagation.TraceContext{}
	emptyContext = context.Background()
	serverKind   = trace.WithSpanKind(trace.SpanKindServer)
)

// Start opens the spans of x's messages, nil when Caddy does not trace
// x's request; their durations are labelled by tools, the config's.
func Start(x *feature.Exchange, tools *Tools) *Spans {
	ctx := x.Request.Context()
	http := trace.SpanFromContext(ctx)
	if !http.IsRecording() || len(x.Messages) == 0 {
		return nil
	}
	tracer := http.TracerProvider().Tracer(Instrumentation)
	s := &Spans{splice: x.Body != nil, tools: tools, x: x}
	s.msgs = s.one[:0]
	if len(x.Messages) > len(s.one) {
		s.msgs = make([]message, 0, len(x.Messages))
	}
	common := commonAttributes(x.Request)
	start := trace.WithTimestamp(x.Start)
	for i := range x.Messages {
		m := &x.Messages[i]
		if m.Kind != jsonrpc.Request && m.Kind != jsonrpc.Notification {
			// A body holding responses as well: which span is whose is
			// not sure; its messages keep what the client sent.
			s.splice = false
			continue
		}
		msg := message{method: feature.MethodName(m.Method), start: x.Start, carrier: m.Carrier()}
		name, attrs := describe(m, &msg, make([]attribute.KeyValue, 0, maxAttributes))
		opts := append(make([]trace.SpanStartOption, 0, 4), serverKind, start, trace.WithAttributes(append(attrs, common...)...))
		parent := ctx
		if remote, ok := clientContext(x.Body, &msg.carrier); ok {
			// The conventions: the context the message carries is the
			// parent; the HTTP request's, a link.
			parent = trace.ContextWithSpanContext(ctx, remote)
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: http.SpanContext()}))
		}
		_, msg.span = tracer.Start(parent, name, opts...)
		s.msgs = append(s.msgs, msg)
	}
	if len(s.msgs) == 1 && len(x.Messages) == 1 {
		caddyhttp.SetVar(ctx, feature.SpanVar, s.msgs[0].span)
	}
	return s
}

// maxAttributes is room for the attributes of a message's span.
const maxAttributes = 10

// describe appends the attributes of m's span to attrs, says its name, and
// notes in msg what the metric and the answer need: the request's id as
// sent, the tool a tools/call names. Each string is made once, and none
// for a method of the specification.
func describe(m *jsonrpc.Message, msg *message, attrs []attribute.KeyValue) (string, []attribute.KeyValue) {
	method := msg.method
	if method == "other" {
		method = feature.Clip(string(m.Method))
	}
	attrs = append(attrs, attribute.String("mcp.method.name", method))
	if m.Kind == jsonrpc.Request {
		msg.id = string(m.ID)
		id := msg.id
		switch {
		case len(id) < 2 || id[0] != '"':
		case strings.IndexByte(id, '\\') < 0:
			id = id[1 : len(id)-1]
		default:
			id = idString(m.ID)
		}
		attrs = append(attrs, attribute.String("jsonrpc.request.id", id))
	}
	name := method
	switch method {
	case "tools/call":
		tool := string(m.Name)
		if m.Kind == jsonrpc.Request {
			msg.tool = tool
		}
		tool = feature.Clip(tool)
		name += " " + tool
		attrs = append(attrs, attribute.String("gen_ai.tool.name", tool), attribute.String("gen_ai.operation.name", "execute_tool"))
	case "prompts/get":
		prompt := feature.Clip(string(m.Name))
		name += " " + prompt
		attrs = append(attrs, attribute.String("gen_ai.prompt.name", prompt))
	}
	return name, attrs
}

// idString is a request id as the conventions write it: a string's
// content, a number as written.
func idString(id []byte) string {
	if len(id) >= 2 && id[0] == '"' {
		return string(jsonrpc.AppendUnquoted(nil, id[1:len(id)-1]))
	}
	return string(id)
}

// commonAttributes are the attributes every message of r shares: its
// protocol version and session (as a digest: the id is a credential), and
// its transport.
func commonAttributes(r *http.Request) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("network.transport", "tcp"),
		attribute.String("network.protocol.name", "http"),
		attribute.String("network.protocol.version", protocolVersion(r)),
	}
	if r.ProtoMajor == 3 {
		attrs[0] = attribute.String("network.transport", "quic")
	}
	if v := strings.TrimSpace(r.Header.Get("Mcp-Protocol-Version")); v != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", feature.Clip(v)))
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		// Digested even when it looks like a digest: the id is the
		// client's to choose, and a credential.
		attrs = append(attrs, attribute.String("mcp.session.id", keys.Shown(feature.BoundKey(id, 0))))
	}
	return attrs
}

func protocolVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "2"
	case 3:
		return "3"
	}
	return "1.1"
}

// AppendBody appends body (the request's, as the client sent it) to dst
// (a recycled buffer, feature.SpliceRoom per message larger than body),
// with each message's span context in its params._meta, for the upstream,
// and says whether it changed anything: nothing when the request is not
// traced.
func (s *Spans) AppendBody(dst, body []byte) ([]byte, bool) {
	if s == nil || !s.splice {
		return dst, false
	}
	out, last, changed := dst, 0, false
	for i := range s.msgs {
		m := &s.msgs[i]
		sc := m.span.SpanContext()
		if m.carrier.Unsure || !sc.IsValid() {
			continue
		}
		out, last = splice(out, body, last, &m.carrier, sc)
		changed = true
	}
	return append(out, body[last:]...), changed
}

// Event records an event that took time on every span still open: a wait
// in a queue, the upstream's first byte.
func (s *Spans) Event(name string, attrs ...attribute.KeyValue) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.event(name, attrs...)
}

func (s *Spans) event(name string, attrs ...attribute.KeyValue) {
	opt := trace.WithAttributes(attrs...)
	for i := range s.msgs {
		if !s.msgs[i].done {
			s.msgs[i].span.AddEvent(name, opt)
		}
	}
}

// phaseEvents are the events that record the phases of admission.
var phaseEvents = [...]string{
	feature.PhaseSession:   "caddy.mcp.session",
	feature.PhaseAdmission: "caddy.mcp.limits",
	feature.PhaseChecks:    "caddy.mcp.checks",
	feature.PhaseEntry:     "caddy.mcp.guard",
}

// Phase records a phase of admission the messages went through, and the
// time it took: a session opened, the limits decided, the checks, a place
// in the concurrency guard (a wait in its queue).
func (s *Spans) Phase(p feature.Phase, d time.Duration) {
	if int(p) >= len(phaseEvents) || phaseEvents[p] == "" {
		return
	}
	s.Event(phaseEvents[p], attribute.Float64("caddy.mcp.duration_seconds", d.Seconds()))
}

// Upstream records that the upstream's answer began, with its status.
func (s *Spans) Upstream(status int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.server()
	s.event("caddy.mcp.upstream.response", attribute.Int("http.response.status_code", status))
}

// server puts the server of several the request went to on the spans,
// once (caddy.mcp.server: a configured name, bounded); s.mu is held.
func (s *Spans) server() {
	if s.serverSet || s.x == nil || s.x.Server == "" {
		return
	}
	s.serverSet = true
	for i := range s.msgs {
		if !s.msgs[i].done {
			s.msgs[i].span.SetAttributes(attribute.String("caddy.mcp.server", s.x.Server))
		}
	}
}

// Answer is the hook that reads the answer for the spans: the spans
// themselves (answers.go).
func (s *Spans) Answer() feature.Hook {
	if s == nil {
		return nil
	}
	return s
}

// Answered records the gateway's envelope, written for the messages not
// answered otherwise, and the rule that refused them, if one did.
func (s *Spans) Answered(env *envelope.Envelope, by feature.Rule) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.server()
	s.envelope, s.rule = env, by
	attrs := []attribute.KeyValue{attribute.String("caddy.mcp.envelope.code", string(env.Code))}
	if by.Kind != "" {
		attrs = append(attrs, attribute.String("caddy.mcp.rule.kind", by.Kind), attribute.String("caddy.mcp.rule.name", by.Name))
	}
	if d := env.RetryAfterSeconds(); d > 0 {
		attrs = append(attrs, attribute.Int64("caddy.mcp.retry_after", d))
	}
	s.event("caddy.mcp.envelope", attrs...)
}

// Finish ends every span still open: with the gateway's envelope when it
// wrote one, else as the answer ended.
func (s *Spans) Finish(now time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	for i := range s.msgs {
		m := &s.msgs[i]
		if m.done {
			continue
		}
		switch {
		case s.envelope != nil:
			s.end(m, string(s.envelope.Code), s.envelope.Message, now)
		case m.id != "" && s.ending != feature.Complete:
			s.end(m, s.ending.String(), "the answer ended without this request's response", now)
		case m.id != "":
			s.end(m, "no_response", "the answer ended without this request's response", now)
		default:
			s.end(m, "", "", now)
		}
	}
}

// end ends m's span, failed with errorType unless it is "".
func (s *Spans) end(m *message, errorType, description string, now time.Time) {
	m.done = true
	if errorType != "" {
		m.span.SetAttributes(attribute.String("error.type", errorType))
		m.span.SetStatus(codes.Error, feature.Clip(description))
	}
	m.span.End(trace.WithTimestamp(now))
	s.tools.observe(m, errorType, now)
}
