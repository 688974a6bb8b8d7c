package handler

import (
	"net/http"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/answer"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/reqbody"
)

// Streaming a large call: a tools/call whose body is declared longer than
// the handler's StreamAbove is decided on its head (method, id and
// params.name, which the Go and Python SDKs write before the arguments),
// read on the request's goroutine (package reqbody). A call refused on its
// head is read and validated whole right there, and answered: the upstream
// side never starts. An admitted one goes to the upstream as it arrives,
// while a goroutine reads and validates the rest as any body is (gate.go).
// When the rest is malformed, ambiguous, too slow or cut, its request is
// aborted before the body completes, the tokens and places are given back,
// and the client is answered as if the whole body had been read first.
// Until the verdict, the client is given nothing: an upstream that answers
// early is held.
//
// A body whose head does not decide (a batch, an id or a name after the
// arguments, as the TypeScript SDK writes them, any other method) is read
// whole, as a smaller one is; so is every body when validate is on, whose
// schemas read the arguments, and under a concurrency guard (see streams).
//
// Streaming costs CPU: where the whole body is there at once (loopback, a
// fast link), an admitted call that streams costs 1.2 to 1.8 times the CPU
// of one read whole, at every size (BenchmarkServeForwardedLarge). What it
// buys is time: the upstream has the body as soon as the client has sent
// it, rather than after the gateway has read and then forwarded it all.
// That is worth the most for the largest bodies, hence a threshold
// (DefaultStreamAbove).

// DefaultReadBodyTimeout is the default of Handler.ReadBodyTimeout.
const DefaultReadBodyTimeout = 10 * time.Second

// bodyLimits are the bounds on a body the handler reads.
func (h *Handler) bodyLimits() reqbody.Limits {
	return reqbody.Limits{Max: h.MaxRequestBody, Timeout: time.Duration(h.ReadBodyTimeout), MaxBatch: h.MaxBatch}
}

// streams reports whether r's body may go to the upstream as it arrives:
// not while a feature must have the whole body first (feature.WholeBody):
// validate reads a call's arguments, and under a concurrency guard a place
// would be taken on the head, and a client trickling the rest of its body
// would hold it for up to read_body_timeout, however little it sent; N
// such clients would keep every call out. (A rate limit's tokens are the
// caller's own to spend.)
func (h *Handler) streams(r *http.Request) bool {
	return r.ContentLength > h.StreamAbove && r.ContentLength <= h.MaxRequestBody &&
		!h.wholeBody && claimsJSON(r) && answer.IdentityEncoded(r.Header)
}

// toolsCallMethod is the method of every head that decides.
var toolsCallMethod = []byte("tools/call")

// callHead decides a body on a tools/call's head, if its method and id
// came before its name; a name without them decides nothing, and the body
// is read whole.
func callHead(m jsonrpc.Message) (jsonrpc.Message, bool) {
	if m.ID == nil || string(m.Method) != "tools/call" {
		return m, false
	}
	return jsonrpc.Message{Kind: jsonrpc.Request, Method: toolsCallMethod, ID: m.ID, Name: m.Name}, true
}

// inspectStreaming reads x's body until its head decides, or the body is
// in, on the request's goroutine.
func (h *Handler) inspectStreaming(w http.ResponseWriter, x *exchange) error {
	r := x.Request
	b := reqbody.Open(w, r, h.bodyLimits(), h.logger, callHead)
	x.outgrown = b
	if head, ok := b.Head(); ok {
		x.stream = b
		x.Messages, x.Batch = append(x.one[:0], head), false
		r.Body = b
		r.TransferEncoding = nil
		if err := checkInspected(x); err != nil {
			// As without streaming: a body that is not JSON is refused as
			// such first.
			if verdict := b.Rest(); verdict != nil {
				err = verdict
			}
			x.answering = true
			return err
		}
		return nil
	}
	// Read whole: inspected as any body.
	body, msgs, batch, err := b.Whole()
	x.pooled = b.Buffer()
	if err != nil {
		return err
	}
	x.giveBack(body)
	x.Messages, x.Batch = msgs, batch
	return checkInspected(x)
}
