package results

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/resultstore"
)

// Keeping a result whole (page): past its budget, the text of its text
// blocks (decoded, one block's after another's with a newline between)
// is written to the store as it is read, and the call is answered with a
// RESULT_TRUNCATED warning, the text's first bytes that fit and a
// resource_link to the whole, which resources/read gives page by page
// (read.go). What cannot be kept so falls back to the refusal: a result
// with structuredContent (its schema holds all of it or nothing), one
// with no text block, or one whose block gives its text before its type.
// When the store refuses (a bound reached) or the call has no owner, the
// refusal says why nothing was kept.

// keeping is a call's answer held to the budget, a response over it kept
// whole and paged (feature.Cutter).
type keeping struct {
	*held
	// owner is whom the result is kept for (ownerOf); ctx the call's;
	// span is the call's span (callSpan), nil when not traced: its
	// context is kept with the result, for the reads to link to.
	owner string
	ctx   context.Context
	span  trace.Span
}

// Message keeps the call's response when it is over the budget.
func (k *keeping) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	if len(msg) <= k.budget || notTheCalls(msg, k.id) {
		return nil, nil
	}
	kp := k.newKeeper()
	kp.Write(msg)
	out, err := kp.Close()
	if unkept := (*errUnkept)(nil); errors.As(err, &unkept) {
		unkept.size = len(msg) // held whole: its size is known
	}
	return out, err
}

// Cut reads a response the core cannot hold.
func (k *keeping) Cut(*feature.Exchange) feature.Cut { return k.newKeeper() }

// errUnkept: the result is over the budget and could not be kept (why:
// the store's error, or errNoOwner); size is what was read of it.
type errUnkept struct {
	why  error
	size int
}

func (e *errUnkept) Error() string { return "the result was not kept: " + e.why.Error() }

// errNoOwner: the call has no principal nor session to keep its result
// for.
var errNoOwner = errors.New("no principal nor session")

// Unreadable is RESULT_TOO_LARGE, saying why nothing was kept when the
// result could not be.
func (k *keeping) Unreadable(x *feature.Exchange, err error) envelope.Envelope {
	var unkept *errUnkept
	if !errors.As(err, &unkept) {
		return k.held.Unreadable(x, err)
	}
	k.over(actionRefused, unkept.size)
	return notKept(k.tool, unkept.size, k.budget, k.paging, unkept.why, k.b.store.Limits())
}

// keeper reads one response, keeping its text (feature.Cut): the cut's
// scanner reads it, and gives the keeper each text block's text.
type keeper struct {
	k *keeping
	c *cut
	w *resultstore.Writer
	u unescaper
	// preview is the text's first bytes, at most limit.
	preview []byte
	limit   int
	// texts are the text blocks kept, others the blocks that are not;
	// taking: the block being read is kept.
	texts, others int
	taking        bool
	// fallback: the result is not one to keep (it is refused); err: it
	// could not be kept.
	fallback bool
	err      error
}

// TextBuffer is the decoded text a result kept whole holds before it is
// written to the store, at most: it is written once it reaches half of
// it (flushAt), and the response is read in pieces of at most a quarter
// of that (readAt), each of which decodes to at most three times its
// bytes (an invalid byte is U+FFFD). With the store's chunk
// (resultstore.Limits.Chunk), it is what keeping a result costs beside
// the budget, whatever the result's size.
const TextBuffer = 64 << 10

const (
	flushAt = TextBuffer / 2
	readAt  = flushAt / 4
)

func (k *keeping) newKeeper() *keeper {
	kp := &keeper{k: k, c: newHeadless(k.held), limit: k.budget - k.pageOverhead()}
	kp.c.sink = kp
	if k.owner == "" {
		kp.err = errNoOwner
	}
	return kp
}

// Write reads the next piece of the response, a readAt at a time, so
// that the text it decodes stays within TextBuffer.
func (kp *keeper) Write(p []byte) bool {
	for {
		if kp.err != nil {
			return false
		}
		n := min(len(p), readAt)
		more := kp.c.Write(p[:n])
		if len(kp.u.out) >= flushAt {
			kp.flush()
		}
		if p = p[n:]; !more || kp.err != nil || len(p) == 0 {
			return more && kp.err == nil
		}
	}
}

// textBegin takes the text of a text block whose type came first.
func (kp *keeper) textBegin(b *block) bool {
	switch {
	case kp.err != nil || kp.fallback:
		return false
	case b.seen&1 == 0:
		kp.fallback = true // its type, after it, is not known yet
		return false
	case b.odd || string(b.typ) != "text":
		return false
	}
	if kp.w == nil {
		w, err := kp.k.b.store.Create(kp.k.ctx, kp.k.owner)
		if err != nil {
			kp.err = err
			return false
		}
		kp.w = w
		kp.u.out = make([]byte, 0, TextBuffer)
		kp.preview = make([]byte, 0, max(0, kp.limit))
	}
	if kp.texts > 0 {
		kp.u.out = append(kp.u.out, '\n')
	}
	kp.taking = true
	return true
}

func (kp *keeper) text(raw []byte) { kp.u.Write(raw) }

func (kp *keeper) textEnd() {
	if kp.u.End() != nil {
		kp.fallback = true
	}
	kp.u = unescaper{out: kp.u.out}
}

func (kp *keeper) blockDone(b *block) {
	switch {
	case !kp.taking:
		kp.others++
	case b.odd:
		kp.fallback = true // a member given twice, or in another case
	default:
		kp.texts++
	}
	kp.taking = false
}

// flush writes the text decoded so far to the store, keeping its first
// bytes for the preview.
func (kp *keeper) flush() {
	out := kp.u.out
	kp.u.out = out[:0]
	if kp.err != nil || kp.w == nil || len(out) == 0 {
		return
	}
	if k := kp.limit - len(kp.preview); k > 0 {
		kp.preview = append(kp.preview, out[:min(k, len(out))]...)
	}
	if _, err := kp.w.Write(out); err != nil {
		kp.err = err
	}
}

// Close is the answer: the preview and the link, once the whole text is
// kept; errOverBudget when the result is not one to keep, *errUnkept when
// it could not be kept.
func (kp *keeper) Close() ([]byte, error) {
	out, err := kp.close()
	if err != nil {
		if kp.w != nil {
			kp.w.Abort(context.WithoutCancel(kp.k.ctx))
		}
		if kp.err != nil {
			return nil, &errUnkept{why: kp.err, size: kp.size()}
		}
		return nil, err
	}
	kp.k.over(actionPaged, kp.c.n)
	return out, nil
}

// size is the bytes of the response, once read to its end; 0 when the
// reading stopped before (the store refused it): what was read is not its
// size.
func (kp *keeper) size() int {
	if !kp.c.done {
		return 0
	}
	return kp.c.n
}

func (kp *keeper) close() ([]byte, error) {
	c := kp.c
	over := errOverBudget{size: c.n}
	if errors.Is(c.sc.err, errTooLong) {
		over.size = 0
	}
	if kp.err != nil {
		return nil, kp.err
	}
	if kp.fallback || c.sc.err != nil || !c.done || !c.result || !c.content || c.long || !sameID(c.id, kp.k.id) || c.structured || kp.texts == 0 || kp.limit <= 0 {
		return nil, over
	}
	if kp.flush(); kp.err != nil {
		return nil, kp.err
	}
	_ = kp.w.SetNote(traceNote(kp.k.span)) // a traceparent: far within MaxNote
	id, size, err := kp.w.Close(kp.k.ctx)
	if err != nil {
		kp.err = err
		return nil, err
	}
	kp.k.b.logKept(kp.k.tool, id, size, kp.k.owner)
	return kp.k.appendPaged(kp.preview, kp.limit, id, size, c.n, kp.others, c.isError == 't'), nil
}

// resultURI is the link to result id, read from byte from.
func resultURI(id string, from int64) string {
	if from == 0 {
		return URIPrefix + id
	}
	return URIPrefix + id + "?from=" + strconv.FormatInt(from, 10)
}

// URIPrefix begins the links to the results kept.
const URIPrefix = feature.GatewayScheme + "results/"
