package tracing

import (
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Trace context in params._meta (SEP-414, and the conventions' context
// propagation): a client may send traceparent and tracestate there, and
// the gateway sends its own span's there to the upstream, so that an MCP
// server that reads it continues the trace. The body is edited by
// splicing bytes where the core's parse found params and _meta
// (jsonrpc.Carrier): everything else stays as the client wrote it, and
// the body is not read again.

// clientContext is the trace context the message c describes carries in
// its params._meta, when it carries a valid one, read with certainty.
func clientContext(body []byte, c *jsonrpc.Carrier) (trace.SpanContext, bool) {
	if body == nil || c.Unsure || c.Traceparent.End == 0 {
		return trace.SpanContext{}, false
	}
	tp, ok := plainString(body, c.Traceparent)
	if !ok {
		return trace.SpanContext{}, false
	}
	ts, _ := plainString(body, c.Tracestate)
	sc := trace.SpanContextFromContext(propagator.Extract(emptyContext, headers{tp, ts}))
	return sc, sc.IsValid()
}

// plainString is the value of mm, when it is a string without escapes.
func plainString(body []byte, mm jsonrpc.MetaMember) (string, bool) {
	v := body[mm.Value:mm.End]
	if mm.End == 0 || len(v) < 2 || v[0] != '"' {
		return "", false
	}
	v = v[1 : len(v)-1]
	for _, c := range v {
		if c == '\\' {
			return "", false
		}
	}
	return string(v), true
}

// headers carries a traceparent and a tracestate to the propagator.
type headers [2]string

func (h headers) Get(key string) string {
	switch key {
	case "traceparent":
		return h[0]
	case "tracestate":
		return h[1]
	}
	return ""
}
func (headers) Set(string, string) {}
func (headers) Keys() []string     { return []string{"traceparent", "tracestate"} }

// splice appends body from last to where the message c describes is given
// sc in its params._meta, and what goes there: a new _meta (and params),
// or the client's _meta with its traceparent and tracestate replaced. It
// returns where the body goes on.
func splice(out, body []byte, last int, c *jsonrpc.Carrier, sc trace.SpanContext) ([]byte, int) {
	switch {
	case c.Meta.End != 0:
		out = append(out, body[last:c.Meta.Start]...)
		return appendMeta(out, body, c, sc), c.Meta.End
	case c.Params.End != 0:
		at := c.Params.Start + 1
		out = append(out, body[last:at]...)
		out = append(out, `"_meta":`...)
		out = appendContext(out, sc)
		if !isEmptyObject(body, c.Params) {
			out = append(out, ',')
		}
		return out, at
	}
	at := c.Object.Start + 1
	out = append(out, body[last:at]...)
	out = append(out, `"params":{"_meta":`...)
	out = appendContext(out, sc)
	out = append(out, '}')
	if !isEmptyObject(body, c.Object) {
		out = append(out, ',')
	}
	return out, at
}

// appendContext appends the _meta object that holds sc alone.
func appendContext(out []byte, sc trace.SpanContext) []byte {
	out = append(out, '{')
	out = appendMembers(out, sc)
	return append(out, '}')
}

// appendMembers appends sc as the members traceparent and, when it has
// one, tracestate, written as the W3C propagator writes them.
func appendMembers(out []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	out = append(out, `"traceparent":"00-`...)
	out = hex.AppendEncode(out, tid[:])
	out = append(out, '-')
	out = hex.AppendEncode(out, sid[:])
	out = append(out, '-')
	out = hex.AppendEncode(out, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	out = append(out, '"')
	if ts := sc.TraceState(); ts.Len() > 0 {
		out = append(out, `,"tracestate":`...)
		out = appendString(out, ts.String())
	}
	return out
}

// appendString appends s as a JSON string. A tracestate is printable
// ASCII, which may hold a quote or a backslash (one from the client's
// tracestate header).
func appendString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20:
			out = append(out, `\u00`...)
			out = hex.AppendEncode(out, []byte{c})
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}

// appendMeta appends the client's _meta, which c describes, with sc's
// members first, in place of its own traceparent and tracestate, every
// other member as written.
func appendMeta(out, body []byte, c *jsonrpc.Carrier, sc trace.SpanContext) []byte {
	out = append(out, '{')
	out = appendMembers(out, sc)
	cuts := cuts(body, c.Traceparent, c.Tracestate)
	// The rest of _meta's inside: up to three pieces around the cuts.
	var rest [3][]byte
	n, at := 0, c.Meta.Start+1
	for _, k := range cuts {
		if k.End == 0 {
			continue
		}
		if k.Start > at {
			rest[n], n = body[at:k.Start], n+1
		}
		at = k.End
	}
	rest[n], n = body[at:c.Meta.End-1], n+1
	if !allSpace(rest[:n]) {
		out = append(out, ',')
		for _, p := range rest[:n] {
			out = append(out, p...)
		}
	}
	return append(out, '}')
}

// cuts are what goes with the members a and b of _meta when they are
// taken out, in order: each with one comma, or both with one when they
// are next to each other.
func cuts(body []byte, a, b jsonrpc.MetaMember) [2]jsonrpc.Span {
	if b.Start < a.Start {
		a, b = b, a
	}
	if a.End != 0 {
		if comma := spaceAfter(body, a.End); body[comma] == ',' && spaceAfter(body, comma+1) == b.Start {
			return [2]jsonrpc.Span{{}, cut(body, jsonrpc.MetaMember{Start: a.Start, End: b.End})}
		}
	}
	return [2]jsonrpc.Span{cut(body, a), cut(body, b)}
}

// cut is what goes with the member mm of _meta when it is taken out: the
// member, and the comma that parts it from the member before it, or else
// from the one after it, with the spaces around that comma. Zero when mm
// is.
func cut(body []byte, mm jsonrpc.MetaMember) jsonrpc.Span {
	if mm.End == 0 {
		return jsonrpc.Span{}
	}
	before := spaceBefore(body, mm.Start)
	if body[before-1] == ',' {
		return jsonrpc.Span{Start: spaceBefore(body, before-1), End: mm.End}
	}
	after := spaceAfter(body, mm.End)
	if body[after] == ',' {
		return jsonrpc.Span{Start: mm.Start, End: spaceAfter(body, after+1)}
	}
	return jsonrpc.Span{Start: mm.Start, End: mm.End}
}

// spaceBefore is where the whitespace that ends at i begins.
func spaceBefore(b []byte, i int) int {
	for i > 0 && isSpace(b[i-1]) {
		i--
	}
	return i
}

// spaceAfter is where the whitespace that begins at i ends.
func spaceAfter(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// allSpace reports whether pieces hold whitespace only.
func allSpace(pieces [][]byte) bool {
	for _, p := range pieces {
		if spaceAfter(p, 0) != len(p) {
			return false
		}
	}
	return true
}

// isEmptyObject reports whether the object at o holds no member.
func isEmptyObject(b []byte, o jsonrpc.Span) bool {
	return spaceAfter(b, o.Start+1) == o.End-1
}
