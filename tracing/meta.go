package tracing

import (
	"bytes"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Trace context in params._meta (SEP-414, and the conventions' context
// propagation): a client may send traceparent and tracestate there, and
// the gateway sends its own span's there to the upstream, so that an MCP
// server that reads it continues the trace. The body is edited by
// splicing bytes: everything else stays as the client wrote it.

// carrier is what one message of a body holds of trace context, and where.
type carrier struct {
	traceparent, tracestate string
	// params is where the message's params object lies ({ to }), zero
	// when it has none; object the message's own braces.
	params, object span
	// meta is where params._meta lies, zero when params has none.
	meta span
	// ok: the message is an object read with certainty (its params and
	// _meta, and their keys, each given once).
	ok bool
}

type span struct{ start, end int }

// carriers reads the trace context of each message of body (an object, or
// an array of them), in order; nil when body is not JSON.
func carriers(body []byte) []carrier {
	var out []carrier
	w := jsonrpc.NewWalker(body)
	var err error
	if w.Peek() == '[' {
		err = w.Array(func() error {
			c, err := readMessage(w, body)
			out = append(out, c)
			return err
		})
	} else {
		var c carrier
		c, err = readMessage(w, body)
		out = append(out, c)
	}
	if err != nil || w.End() != nil {
		return nil
	}
	return out
}

// readMessage reads the message that comes next in the walk over body. A
// member given twice leaves the message not ok (its context is neither
// read nor written), and the walk goes on.
func readMessage(w *jsonrpc.Walker, body []byte) (carrier, error) {
	c := carrier{ok: true}
	if w.Peek() != '{' {
		return carrier{}, w.Skip()
	}
	c.object.start = w.Pos()
	err := w.Object(func(key []byte) error {
		if string(key) != "params" || w.Peek() != '{' {
			return w.Skip()
		}
		c.ok = c.ok && c.params.end == 0
		c.params.start = w.Pos()
		err := w.Object(func(key []byte) error {
			if string(key) != "_meta" || w.Peek() != '{' {
				return w.Skip()
			}
			c.ok = c.ok && c.meta.end == 0
			c.meta.start = w.Pos()
			err := readMeta(w, body, &c)
			c.meta.end = w.Offset()
			return err
		})
		c.params.end = w.Offset()
		return err
	})
	c.object.end = w.Offset()
	return c, err
}

// readMeta reads the _meta object that comes next: its traceparent and
// tracestate, when they are strings given once.
func readMeta(w *jsonrpc.Walker, body []byte, c *carrier) error {
	seen := [2]bool{}
	return w.Object(func(key []byte) error {
		var into *string
		var i int
		switch string(key) {
		case "traceparent":
			into, i = &c.traceparent, 0
		case "tracestate":
			into, i = &c.tracestate, 1
		default:
			return w.Skip()
		}
		c.ok = c.ok && !seen[i]
		seen[i] = true
		start := w.Pos()
		isString := w.Peek() == '"'
		if err := w.Skip(); err != nil || !isString {
			return err
		}
		raw := body[start+1 : w.Offset()-1]
		if bytes.IndexByte(raw, '\\') < 0 {
			*into = string(raw)
		}
		return nil
	})
}

// appendInjected appends body to dst with each message's params._meta
// holding the trace context of its span (values[i]: traceparent,
// tracestate), replacing the client's; a message whose value is empty, or
// that cannot be read with certainty, is left as it is. It says whether it
// changed anything.
func appendInjected(dst, body []byte, cs []carrier, values [][2]string) (out []byte, changed bool) {
	out, last := dst, 0
	for i, c := range cs {
		if i >= len(values) || values[i][0] == "" || !c.ok {
			continue
		}
		at, insert := c.insertion(body, values[i])
		out = append(out, body[last:at.start]...)
		out = append(out, insert...)
		last, changed = at.end, true
	}
	return append(out, body[last:]...), changed
}

// insertion is where the trace context goes in the message c describes,
// and the bytes that go there: a new _meta (and params), or the client's
// _meta with its traceparent and tracestate replaced.
func (c carrier) insertion(body []byte, v [2]string) (at span, insert []byte) {
	members := `"traceparent":"` + v[0] + `"`
	if v[1] != "" {
		members += `,"tracestate":"` + v[1] + `"`
	}
	switch {
	case c.meta.end != 0:
		return c.meta, rewriteMeta(body[c.meta.start:c.meta.end], members)
	case c.params.end != 0:
		after := c.params.start + 1
		sep := ","
		if isEmptyObject(body[c.params.start:c.params.end]) {
			sep = ""
		}
		return span{after, after}, []byte(`"_meta":{` + members + `}` + sep)
	}
	after := c.object.start + 1
	sep := ","
	if isEmptyObject(body[c.object.start:c.object.end]) {
		sep = ""
	}
	return span{after, after}, []byte(`"params":{"_meta":{` + members + `}}` + sep)
}

// rewriteMeta is the _meta object meta with members in place of its own
// traceparent and tracestate, every other member kept as written.
func rewriteMeta(meta []byte, members string) []byte {
	out := append([]byte(nil), '{')
	out = append(out, members...)
	_ = jsonrpc.Members(meta, func(m jsonrpc.Member) bool {
		if string(m.Key) == "traceparent" || string(m.Key) == "tracestate" {
			return true
		}
		out = append(out, ',')
		out = append(out, memberBytes(meta, m)...)
		return true
	})
	return append(out, '}')
}

// memberBytes is member m of obj as written: its key and its value.
func memberBytes(obj []byte, m jsonrpc.Member) []byte {
	// The key ends at the last quote before the colon before the value.
	colon := bytes.LastIndexByte(obj[:m.Start], ':')
	quote := bytes.LastIndexByte(obj[:colon], '"')
	open := quote - 1
	for open > 0 && (obj[open] != '"' || isEscaped(obj, open)) {
		open--
	}
	return obj[open:m.End]
}

// isEscaped reports whether the quote at i is escaped by the backslashes
// before it.
func isEscaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

func isEmptyObject(obj []byte) bool {
	return len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0
}
