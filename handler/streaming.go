package handler

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// Streaming a large call: a tools/call whose body is declared longer than
// the handler's StreamAbove is decided on its head (method, id and
// params.name, which the Go and Python SDKs write before the arguments),
// read on the request's goroutine. A call refused on its head is read and
// validated whole right there, and answered: the upstream side never
// starts. An admitted one goes to the upstream as it arrives, while a
// goroutine reads and validates the rest as any body is. The upstream is
// given only bytes that lie inside the message's top-level object, which
// has not ended: it cannot run an incomplete message. When the whole body
// is in and valid, it gets the last bytes; when the rest is malformed,
// ambiguous, too slow or cut, its request is aborted before the body
// completes, the tokens and places are given back, and the client is
// answered as if the whole body had been read first. Until the verdict,
// the client is given nothing: an upstream that answers early is held.
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

// headStep is the first slice of the body the head pass parses; each next
// is twice as long, so that a head found early costs the parse of little
// more than itself, and a body without one is parsed once.
const headStep = 512

// errStreamRefused aborts the upstream's request for a body the handler
// refused once it had started to stream it.
var errStreamRefused = errors.New("the request body was refused")

// errBodyUnread is the verdict on a body whose reading panicked: the
// gateway's bug, answered 500.
var errBodyUnread = errors.New("reading the request body failed")

// siteBodyStream is where a panic of reading a streamed body is recovered
// (package panics).
const siteBodyStream = "body_stream"

// streams reports whether r's body may go to the upstream as it arrives:
// not while a feature must have the whole body first (feature.WholeBody):
// validate reads a call's arguments, and under a concurrency guard a place
// would be taken on the head, and a client trickling the rest of its body
// would hold it for up to read_body_timeout, however little it sent; N
// such clients would keep every call out. (A rate limit's tokens are the
// caller's own to spend.)
func (h *Handler) streams(r *http.Request) bool {
	return r.ContentLength > h.StreamAbove && r.ContentLength <= h.MaxRequestBody &&
		!h.wholeBody && claimsJSON(r) && identityEncoded(r.Header)
}

// bodyStream is a body read and validated, past its head, by a goroutine
// of its own while the upstream's transport reads what it may of it.
type bodyStream struct {
	// Of the reading goroutine (the request's until the head decides, then
	// the scan's): the client's body, its declared length, the bytes
	// received, and how many of them the scan was given.
	client io.Reader
	limit  int
	n      int
	given  int
	// readErr is why reading the client's body ended early.
	readErr error
	// toldOpen is the most bytes the scan has said lie inside the open
	// top-level value.
	toldOpen int
	one      [1]jsonrpc.Message
	maxBatch int
	// lift takes the read deadline off once the body is in, if one was
	// set.
	lift func()
	// logger is told of a panic of the reading.
	logger *zap.Logger

	// head is the message's head, when the head pass found one that
	// decides.
	head     jsonrpc.Message
	headSeen bool

	// done is closed when the scan of the whole body is over, and msgs,
	// batch and err are then its result.
	done  chan struct{}
	msgs  []jsonrpc.Message
	batch bool

	mu   sync.Mutex
	cond sync.Cond
	// buf holds the bytes received (replaced as it grows); the upstream
	// may have the first safe of them, and has had sent.
	buf        *[]byte
	safe, sent int
	ended      bool
	// err is the verdict on the whole body, once ended.
	err    error
	closed bool

	// answering: the handler is answering the body's refusal, which
	// every answer given before gives way to (of the handler's goroutine).
	answering bool

	// retired are the buffers the body outgrew (of the scan's goroutine
	// until it ends): the messages parsed before a growth may point into
	// them, so they go back to the pool only with the last one, when the
	// exchange is recycled. Past len(retired), one is left to the
	// collector.
	retired  [8]*[]byte
	nRetired int
}

// dropsAnswers reports whether an answer given now would be dropped: the
// body streams (b is not nil) and was refused, and its refusal is not the
// answer being given. It waits for the verdict.
func (b *bodyStream) dropsAnswers() bool {
	return b != nil && !b.answering && b.wait() != nil
}

// toolsCallMethod is the method of every head that decides.
var toolsCallMethod = []byte("tools/call")

// inspectStreaming reads x's body until its head decides, or the body is
// in, on the request's goroutine.
func (h *Handler) inspectStreaming(w http.ResponseWriter, x *exchange) error {
	r := x.Request
	b := &bodyStream{client: r.Body, limit: int(r.ContentLength), maxBatch: h.MaxBatch, logger: h.logger}
	b.cond.L = &b.mu
	b.buf = getBuffer(firstChunk)
	x.outgrown = b
	if setReadDeadline(w, time.Now().Add(time.Duration(h.ReadBodyTimeout))) {
		b.lift = func() { setReadDeadline(w, time.Time{}) }
	}
	hs := headScan{b: b}
	msgs, batch, err := jsonrpc.ParseStream(&hs, b.one[:0], h.MaxBatch, hs.sawHead)
	if b.headSeen {
		x.stream = b
		x.Messages, x.Batch = append(x.one[:0], b.head), false
		r.Body = b
		r.TransferEncoding = nil
		err := checkMessages(x.Messages)
		if err == nil {
			err = checkMirrorHeaders(r.Header, x)
		}
		if err != nil {
			// As without streaming: a body that is not JSON is refused as
			// such first.
			if verdict := b.rest(); verdict != nil {
				err = verdict
			}
			b.answering = true
			return err
		}
		return nil
	}
	// Read whole: inspected as any body.
	x.pooled = b.buf
	if err = b.verdict(err); err != nil {
		return err
	}
	x.Body = (*b.buf)[:b.n]
	x.reader.Reset(x.Body)
	r.Body = &x.reader
	r.ContentLength = int64(b.n)
	r.TransferEncoding = nil
	x.Messages, x.Batch = msgs, batch
	if err := checkMessages(x.Messages); err != nil {
		return err
	}
	return checkMirrorHeaders(r.Header, x)
}

// headScan is the body as the head pass sees it: the bytes received, in
// slices that double, until the head decides.
type headScan struct {
	b     *bodyStream
	given int
}

func (s *headScan) More(int, bool) ([]byte, bool) {
	b := s.b
	if b.headSeen || (s.given == b.n && !b.receive()) {
		return nil, false
	}
	s.given = min(b.n, max(2*s.given, headStep))
	return (*b.buf)[:s.given], true
}

// sawHead takes a tools/call's head once its name is read, if its method
// and id came before; a name without them decides nothing, and the body is
// read whole. The head points into the buffers, which outlive it.
func (s *headScan) sawHead(m jsonrpc.Message) bool {
	if m.Name == nil {
		return false
	}
	if m.ID != nil && string(m.Method) == "tools/call" {
		s.b.head = jsonrpc.Message{Kind: jsonrpc.Request, Method: toolsCallMethod, ID: m.ID, Name: m.Name}
		s.b.headSeen = true
	}
	return true
}

// start reads and validates the rest of an admitted body on a goroutine
// of its own, while the upstream's transport reads it.
func (b *bodyStream) start() {
	b.done = make(chan struct{})
	go b.run()
}

// rest reads and validates the rest of a body refused on its head, on the
// request's goroutine, and returns the verdict: the upstream never has any
// of it.
func (b *bodyStream) rest() error {
	b.done = make(chan struct{})
	b.run()
	return b.err
}

// run reads and validates the whole body, from its first byte, then gives
// the verdict. A panic of the reading (on the goroutine start gives it)
// is a verdict too: the body is refused.
func (b *bodyStream) run() {
	defer close(b.done)
	defer panics.Recover(b.logger, siteBodyStream, b.unread)
	msgs, batch, err := jsonrpc.ParseStream(b, b.one[:0], b.maxBatch, nil)
	err = b.verdict(err)
	b.msgs, b.batch = msgs, batch
	b.mu.Lock()
	b.ended, b.err = true, err
	if err == nil {
		b.safe = b.n
	}
	b.cond.Broadcast()
	b.mu.Unlock()
}

// unread refuses a body whose reading panicked: the upstream's transport
// reading it is told, and the read deadline lifted.
func (b *bodyStream) unread() {
	if b.lift != nil {
		b.lift()
	}
	b.mu.Lock()
	b.ended, b.err = true, errBodyUnread
	b.cond.Broadcast()
	b.mu.Unlock()
}

// verdict is the verdict on the body once it is read (or its reading
// failed), the scan's err unless the reading failed: the read deadline is
// lifted.
func (b *bodyStream) verdict(err error) error {
	if b.lift != nil {
		b.lift()
	}
	if b.readErr != nil {
		return readError(b.readErr, b.lift != nil)
	}
	return err
}

// More gives the scan the bytes that arrived, first letting the upstream
// have those it has read inside the open message.
func (b *bodyStream) More(read int, open bool) ([]byte, bool) {
	if open && read > b.toldOpen {
		b.toldOpen = read
		b.mu.Lock()
		b.safe = read
		b.cond.Broadcast()
		b.mu.Unlock()
	}
	if b.given == b.n && !b.receive() {
		return nil, false
	}
	b.given = b.n
	return (*b.buf)[:b.n], true
}

// receive reads what the client sent next, and reports whether there was
// any: false once the body is in, or its reading failed.
func (b *bodyStream) receive() bool {
	for b.readErr == nil && b.n < b.limit {
		if b.n == cap(*b.buf) {
			b.grow()
		}
		m, err := b.client.Read((*b.buf)[b.n:min(cap(*b.buf), b.limit)])
		b.n += m
		switch {
		case err == io.EOF && b.n < b.limit:
			b.readErr = io.ErrUnexpectedEOF
		case err != nil && err != io.EOF:
			b.readErr = err
		}
		if m > 0 {
			return true
		}
		if err == io.EOF {
			break
		}
	}
	return false
}

// grow moves the bytes received to a larger buffer, as readBody grows its
// own. The buffer left behind is retired: what the scan learned (a method,
// an id, the head) may point into it.
func (b *bodyStream) grow() {
	want := 2 * cap(*b.buf)
	if cap(*b.buf) < 64<<10 {
		want = 4 * cap(*b.buf)
	}
	q := getBuffer(min(want, b.limit))
	copy(*q, (*b.buf)[:b.n])
	b.mu.Lock()
	old := b.buf
	b.buf = q
	b.mu.Unlock()
	if b.nRetired < len(b.retired) {
		b.retired[b.nRetired] = old
		b.nRetired++
	}
}

// recycleRetired gives back the buffers the body outgrew, once the scan
// is over and nothing reads the messages it parsed.
func (b *bodyStream) recycleRetired() {
	for i := range b.nRetired {
		putBuffer(b.retired[i])
		b.retired[i] = nil
	}
	b.nRetired = 0
}

// Read gives the upstream's transport what it may have of the body,
// waiting for more, and fails once the body is refused.
func (b *bodyStream) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.sent == b.safe && !b.ended && !b.closed {
		b.cond.Wait()
	}
	switch {
	case b.closed:
		return 0, io.EOF
	case b.ended && b.err != nil:
		return 0, errStreamRefused
	case b.sent < b.safe:
		n := copy(p, (*b.buf)[b.sent:b.safe])
		b.sent += n
		return n, nil
	}
	return 0, io.EOF
}

// Close is the transport done with the body.
func (b *bodyStream) Close() error {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	return nil
}

func (b *bodyStream) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// wait waits for the scan's verdict.
func (b *bodyStream) wait() error {
	<-b.done
	return b.err
}
