package handler

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Streaming a large call: a tools/call whose body is declared longer than
// streamFrom is admitted on its head (method, id and params.name, which the
// Go and Python SDKs write before the arguments) and goes to the upstream as
// it arrives, while the rest is read and validated as any body is. The
// upstream is given only bytes that lie inside the message's top-level
// object, which has not ended: it cannot run an incomplete message. When
// the whole body is in and valid, it gets the last bytes; when the rest is
// malformed, ambiguous, too slow or cut, its request is aborted before the
// body completes, the tokens and places are given back, and the client is
// answered as if the whole body had been read first. Until the verdict, the
// client is given nothing: an upstream that answers early is held.
//
// A body whose head does not decide (a batch, an id or a name after the
// arguments, as the TypeScript SDK writes them, any other method) is read
// whole, as a small one is; so is every body when validate is on, whose
// schemas read the arguments, and under a concurrency guard (see streams).

// streamFrom is the declared length above which a body may be streamed: a
// shorter one is read in one chunk anyway.
const streamFrom = firstChunk

// errStreamRefused aborts the upstream's request for a body the handler
// refused once it had started to stream it.
var errStreamRefused = errors.New("the request body was refused")

// streams reports whether r's body may go to the upstream as it arrives:
// not while a feature must have the whole body first (feature.WholeBody):
// validate reads a call's arguments, and under a concurrency guard a place
// would be taken on the head, and a client trickling the rest of its body
// would hold it for up to read_body_timeout, however little it sent; N
// such clients would keep every call out. (A rate limit's tokens are the
// caller's own to spend.)
func (h *Handler) streams(r *http.Request) bool {
	return r.ContentLength > streamFrom && r.ContentLength <= h.MaxRequestBody &&
		!h.wholeBody && claimsJSON(r) && identityEncoded(r.Header)
}

// bodyStream is a body read and validated by a goroutine of its own while
// the upstream's transport reads what it may of it.
type bodyStream struct {
	// Of the scan's goroutine: the client's body, its declared length, and
	// the bytes received.
	client io.Reader
	limit  int
	n      int
	// readErr is why reading the client's body ended early.
	readErr error
	// toldOpen is the most bytes the scan has said lie inside the open
	// top-level value.
	toldOpen int
	one      [1]jsonrpc.Message

	// head gets the message's head, if it decides; done is closed when
	// the scan is over, and msgs, batch and err are then its result.
	head  chan jsonrpc.Message
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

// inspectStreaming starts reading x's body as it arrives and waits until its
// head decides, or the body is in.
func (h *Handler) inspectStreaming(w http.ResponseWriter, x *exchange) error {
	r := x.Request
	b := &bodyStream{client: r.Body, limit: int(r.ContentLength), head: make(chan jsonrpc.Message, 1), done: make(chan struct{})}
	b.cond.L = &b.mu
	b.buf = getBuffer(firstChunk)
	x.outgrown = b
	deadline := setReadDeadline(w, time.Now().Add(time.Duration(h.ReadBodyTimeout)))
	go b.run(h.MaxBatch, func() {
		if deadline {
			setReadDeadline(w, time.Time{})
		}
	}, deadline)
	select {
	case m := <-b.head:
		x.stream = b
		x.Messages, x.Batch = append(x.one[:0], m), false
		r.Body = b
		r.TransferEncoding = nil
		err := checkMessages(x.Messages)
		if err == nil {
			err = checkMirrorHeaders(r.Header, x)
		}
		if err != nil {
			// As without streaming: a body that is not JSON is refused as
			// such first.
			if verdict := b.wait(); verdict != nil {
				err = verdict
			}
			b.answering = true
			return err
		}
		return nil
	case <-b.done:
	}
	// Read whole: inspected as any body.
	x.pooled = b.buf
	if b.err != nil {
		return b.err
	}
	x.Body = (*b.buf)[:b.n]
	x.reader.Reset(x.Body)
	r.Body = &x.reader
	r.ContentLength = int64(b.n)
	r.TransferEncoding = nil
	x.Messages, x.Batch = b.msgs, b.batch
	if err := checkMessages(x.Messages); err != nil {
		return err
	}
	return checkMirrorHeaders(r.Header, x)
}

// run reads and validates the body, then gives the verdict.
func (b *bodyStream) run(maxBatch int, lift func(), deadline bool) {
	defer close(b.done)
	msgs, batch, err := jsonrpc.ParseStream(b, b.one[:0], maxBatch, b.sawHead)
	lift()
	if b.readErr != nil {
		err = readError(b.readErr, deadline)
	}
	b.msgs, b.batch = msgs, batch
	b.mu.Lock()
	b.ended, b.err = true, err
	if err == nil {
		b.safe = b.n
	}
	b.cond.Broadcast()
	b.mu.Unlock()
}

// sawHead takes a tools/call's head once its name is read, if its method
// and id came before; a name without them decides nothing, and the body is
// read whole.
func (b *bodyStream) sawHead(m jsonrpc.Message) bool {
	if m.Name == nil {
		return false
	}
	if m.ID != nil && string(m.Method) == "tools/call" {
		b.head <- jsonrpc.Message{Kind: jsonrpc.Request, Method: []byte("tools/call"), ID: bytes.Clone(m.ID), Name: bytes.Clone(m.Name)}
	}
	return true
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
			return (*b.buf)[:b.n], true
		}
		if err == io.EOF {
			break
		}
	}
	return nil, false
}

// grow moves the bytes received to a larger buffer, as readBody grows its
// own. The buffer left behind is not recycled: what the scan learned (a
// method, an id) may point into it.
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

// streamGate stands between a streamed request's answer and the client:
// the first thing written waits for the verdict on the body, and once the
// body is refused everything written is dropped, so that the handler can
// answer as if it had read the whole body first.
type streamGate struct {
	caddyhttp.ResponseWriterWrapper
	b *bodyStream
	// passed: the body was found valid, and writes go through; dropped: it
	// was refused, and writes go nowhere.
	passed, dropped bool
	discarded       http.Header
}

func (g *streamGate) decide() bool {
	if !g.passed && !g.dropped {
		if g.b.wait() == nil {
			g.passed = true
		} else {
			g.dropped = true
		}
	}
	return g.passed
}

func (g *streamGate) Header() http.Header {
	if g.decide() {
		return g.ResponseWriter.Header()
	}
	if g.discarded == nil {
		g.discarded = make(http.Header)
	}
	return g.discarded
}

func (g *streamGate) WriteHeader(status int) {
	if g.decide() {
		g.ResponseWriter.WriteHeader(status)
	}
}

func (g *streamGate) Write(p []byte) (int, error) {
	if g.decide() {
		return g.ResponseWriter.Write(p)
	}
	return len(p), nil
}

func (g *streamGate) Flush() {
	if g.decide() {
		if f, ok := g.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// ReadFrom keeps io.Copy from reaching around the gate.
func (g *streamGate) ReadFrom(r io.Reader) (int64, error) {
	if g.decide() {
		return io.Copy(g.ResponseWriter, r)
	}
	return io.Copy(io.Discard, r)
}

// serveStreamed admits and forwards a request whose body streams, through
// the gate; a body refused once it was streaming is answered as if it had
// been read whole first, with the tokens and places its head took given
// back.
func (h *Handler) serveStreamed(w http.ResponseWriter, x *exchange, serve func(http.ResponseWriter) error) error {
	b := x.stream
	g := &streamGate{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, b: b}
	err := func() error {
		defer b.wait() // however serve ends, the body is not read past it
		return serve(g)
	}()
	x.pooled = b.buf
	if b.err == nil {
		return err
	}
	now := time.Now()
	x.undo(now, false)
	b.answering = true
	return h.refuseBody(w, x, b.err)
}
