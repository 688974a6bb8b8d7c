package reqbody

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

// Streaming a body: its head (a message read as far as its params.name) is
// read on the caller's goroutine, and decided on (Open). A body refused on
// its head is read and validated whole there (Rest): the upstream has none
// of it. An admitted one goes to the upstream as it arrives (the Stream is
// its body), while a goroutine reads and validates the rest as any body is
// (Start). The upstream is given only bytes that lie inside the message's
// top-level object, which has not ended: it cannot run an incomplete
// message. When the whole body is in and valid, it gets the last bytes;
// when the rest is malformed, ambiguous, too slow or cut, its reads fail
// with ErrRefused before the body completes, and Wait gives the verdict.
//
// A body whose head does not decide is read whole, as Read reads one, and
// Whole gives it.

// headStep is the first slice of the body the head pass parses; each next
// is twice as long, so that a head found early costs the parse of little
// more than itself, and a body without one is parsed once.
const headStep = 512

var (
	// ErrRefused fails the upstream's reads of a body refused once it had
	// started to stream.
	ErrRefused = errors.New("the request body was refused")
	// ErrUnread is the verdict on a body whose reading panicked: the
	// gateway's bug.
	ErrUnread = errors.New("reading the request body failed")
)

// PanicSite is where a panic of reading a streamed body is recovered
// (package panics).
const PanicSite = "body_stream"

// Decide is given each head the parse reads, as far as its params.name,
// and returns the message the body is taken as and whether that head
// decides; the body is read whole when the first head does not. A head
// points into the body's buffers, which outlive it.
type Decide func(head jsonrpc.Message) (jsonrpc.Message, bool)

// Stream is a body read and validated, past its head, by a goroutine of its
// own while the upstream's transport reads what it may of it.
type Stream struct {
	// Of the reading goroutine (the caller's until the head decides, then
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
	// w is where the read deadline is lifted once the body is in, if one
	// was set.
	w http.ResponseWriter
	// logger is told of a panic of the reading.
	logger *zap.Logger

	// head is the message the body is taken as, when the head pass found
	// one that decides.
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
	// err is the verdict on the whole body, once ended; closed: the
	// upstream's transport is done with the body.
	err           error
	ended, closed bool

	// retired are the buffers the body outgrew (of the scan's goroutine
	// until it ends): the messages parsed before a growth may point into
	// them, so they go back to the pool only with the last one (Recycle).
	// Past len(retired), one is left to the collector.
	retired  [8]*[]byte
	nRetired int
}

// Open reads r's body, whose length is declared, until a head decides or
// the body is in, within l, on the caller's goroutine. The read deadline
// set under w is lifted once the whole body is in.
func Open(w http.ResponseWriter, r *http.Request, l Limits, logger *zap.Logger, decide Decide) *Stream {
	b := &Stream{client: r.Body, limit: int(r.ContentLength), maxBatch: l.MaxBatch, logger: logger}
	b.cond.L = &b.mu
	b.buf = Get(firstChunk)
	if setReadDeadline(w, time.Now().Add(l.Timeout)) {
		b.w = w
	}
	hs := headScan{b: b, decide: decide}
	msgs, batch, err := jsonrpc.ParseStream(&hs, b.one[:0], l.MaxBatch, hs.sawHead)
	if !b.headSeen {
		b.msgs, b.batch, b.err = msgs, batch, b.verdict(err)
	}
	return b
}

// Head is the message the body is taken as, when its head decided.
func (b *Stream) Head() (jsonrpc.Message, bool) { return b.head, b.headSeen }

// Whole is a body whose head did not decide, read whole: its bytes, its
// messages, whether it is a batch, or why it could not be read.
func (b *Stream) Whole() (body []byte, msgs []jsonrpc.Message, batch bool, err error) {
	if b.err != nil {
		return nil, nil, false, b.err
	}
	return (*b.buf)[:b.n], b.msgs, b.batch, nil
}

// Buffer is the buffer holding the body, once it is read whole or the
// verdict is in: Put it back once nothing reads the body or its messages.
func (b *Stream) Buffer() *[]byte { return b.buf }

// headScan is the body as the head pass sees it: the bytes received, in
// slices that double, until the head decides.
type headScan struct {
	b      *Stream
	decide Decide
	given  int
}

func (s *headScan) More(int, bool) ([]byte, bool) {
	b := s.b
	if b.headSeen || (s.given == b.n && !b.receive()) {
		return nil, false
	}
	s.given = min(b.n, max(2*s.given, headStep))
	return (*b.buf)[:s.given], true
}

// sawHead asks decide about a head once its name is read; a head with a
// name ends the head pass, whether it decides or not.
func (s *headScan) sawHead(m jsonrpc.Message) bool {
	if m.Name == nil {
		return false
	}
	if head, ok := s.decide(m); ok {
		s.b.head, s.b.headSeen = head, true
	}
	return true
}

// Start reads and validates the rest of an admitted body on a goroutine
// of its own, while the upstream's transport reads it.
func (b *Stream) Start() {
	b.done = make(chan struct{})
	go b.run()
}

// Rest reads and validates the rest of a body refused on its head, on the
// caller's goroutine, and returns the verdict: the upstream never has any
// of it.
func (b *Stream) Rest() error {
	b.done = make(chan struct{})
	b.run()
	return b.err
}

// Wait waits for the verdict of Start or Rest: nil, or why the body is
// refused.
func (b *Stream) Wait() error {
	<-b.done
	return b.err
}

// run reads and validates the whole body, from its first byte, then gives
// the verdict. A panic of the reading (on the goroutine Start gives it)
// is a verdict too: the body is refused.
func (b *Stream) run() {
	defer close(b.done)
	defer panics.Recover(b.logger, PanicSite, b.unread)
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
func (b *Stream) unread() {
	b.lift()
	b.mu.Lock()
	b.ended, b.err = true, ErrUnread
	b.cond.Broadcast()
	b.mu.Unlock()
}

// lift takes the read deadline off, if one was set.
func (b *Stream) lift() {
	if b.w != nil {
		setReadDeadline(b.w, time.Time{})
	}
}

// verdict is the verdict on the body once it is read (or its reading
// failed), the scan's err unless the reading failed: the read deadline is
// lifted.
func (b *Stream) verdict(err error) error {
	b.lift()
	if b.readErr != nil {
		return readError(b.readErr, b.w != nil)
	}
	return err
}
