package handler

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// exchange is what the handler knows of one HTTP request, and what it did
// with it. The features read the feature.Exchange it holds (ServeHTTP
// writes the request, its start, its era and its replacer; inspect its
// messages, body and batch; the session phase the replica), and nothing
// else of it.
type exchange struct {
	feature.Exchange
	// h is the handler that took the request.
	h *Handler

	// Written by inspect: the recycled buffer holding the body (nil when
	// allocated), and the body handed on to the upstream. one backs
	// Messages without allocating.
	pooled *[]byte
	reader reqbody.Reader
	one    [1]jsonrpc.Message
	// stream is the body going to the upstream as it arrives, when it
	// does (streaming.go); outgrown is the streamed read of the body,
	// whose outgrown buffers go back to the pool with pooled.
	stream   *reqbody.Stream
	outgrown *reqbody.Stream

	// Written by admission: how to give back what the admitters took (the
	// buffer backs it without allocating), and the rule that refused the
	// request.
	undos     []feature.Undo
	undoBuf   [4]feature.Undo
	refusedBy feature.Rule

	// Written by forward: the request went to the upstream, and watch
	// follows its answer. canceled, written where an answer is written:
	// the client left while the request waited for a place (beside
	// forwarded, where it takes no room of its own). answering, written
	// where a streamed body is refused: the handler is answering the
	// refusal, which every answer given before gives way to.
	forwarded, canceled, answering bool
	watch                          answer.Watch

	// Written where an answer is written: the envelope code the gateway
	// answered with, and the error behind it.
	errorCode string
	cause     error

	// frozen holds the messages' placeholder values once the body's buffer
	// has been recycled.
	frozen *snapshot

	// trace follows the request, nil when it is not traced
	// (feature.Tracer).
	trace *traced
	// rewritten is the body sent upstream instead of Body, with the trace
	// context spliced in (forward.go) and as the rewriters left it
	// (route.go); nil when it is Body.
	rewritten []byte
}

// traced is a traced request's trace, and the recycled buffer holding the
// body sent upstream with its context, when it differs (nil: none). Apart
// from the exchange, so that a request not traced pays for one pointer.
type traced struct {
	feature.Trace
	buf *[]byte
}

// startTrace starts x's trace, when the handler has a tracer and it
// traces x.
func (x *exchange) startTrace(tracer feature.Tracer) {
	if tracer == nil {
		return
	}
	if t := tracer.Start(&x.Exchange); t != nil {
		x.trace = &traced{Trace: t}
	}
}

// view is the exchange as the features read it, as it stands now: the
// steps before have written what it holds (the session phase its
// Replica).
func (x *exchange) view() *feature.Exchange {
	if x.Path == "" {
		x.Path = x.Request.URL.Path
		if orig, ok := x.Request.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
			x.Path = orig.URL.Path
		}
	}
	return &x.Exchange
}

// placeholder resolves the {http.mcp.*} placeholders. It is registered with
// the request's replacer, so values are computed only when something (a log
// field, a matcher, header_up) asks for them. Those that describe a message
// describe the first of the body.
func (x *exchange) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, feature.PlaceholderPrefix)
	if !ok {
		return nil, false
	}
	switch {
	case name == "error_code":
		return x.errorCode, true
	case x.frozen == nil:
		var first jsonrpc.Message
		if len(x.Messages) > 0 {
			first = x.Messages[0]
		}
		return x.Value(name, &first)
	case name == "batch_size" && x.Batch:
		return strconv.Itoa(x.frozen.size), true
	}
	return x.Value(name, &x.frozen.first)
}

// snapshot is what the placeholders need of the messages once the buffer
// they point into is recycled: copies of the first message's values, and
// the number of messages.
type snapshot struct {
	first jsonrpc.Message
	size  int
}

// recycle gives the body's buffer back once nothing can read it: the
// request was never forwarded, or the upstream's transport closed the body.
// The placeholders, which log_append reads after the handler returns, keep
// copies of their values.
func (x *exchange) recycle() {
	if x.forwarded && !x.bodyClosed() {
		return
	}
	if x.trace != nil && x.trace.buf != nil {
		reqbody.Put(x.trace.buf)
		x.trace.buf = nil
	}
	if x.pooled == nil {
		return
	}
	s := &snapshot{size: len(x.Messages)}
	if len(x.Messages) > 0 {
		m := x.Messages[0]
		s.first = jsonrpc.Message{Kind: m.Kind, Method: bytes.Clone(m.Method), ID: bytes.Clone(m.ID), Name: bytes.Clone(m.Name)}
	}
	x.frozen = s
	x.Messages = nil
	reqbody.Put(x.pooled)
	x.pooled = nil
	if x.outgrown != nil {
		x.outgrown.Recycle()
	}
}

// bodyClosed reports whether the upstream's transport is done with the
// body.
func (x *exchange) bodyClosed() bool {
	if x.stream != nil {
		return x.stream.Closed()
	}
	return x.reader.Closed()
}

// isCall reports whether m is a tools/call request.
var isCall = feature.IsCall
