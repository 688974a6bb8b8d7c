package handler

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Reading a POST body. Memory follows the bytes received, never the length
// a client declares: a client that declares 4 MiB and sends a byte a second
// holds a buffer of firstChunk, not 4 MiB, and the buffer grows only as
// bytes arrive. A body that takes longer than read_body_timeout is cut.

// DefaultReadBodyTimeout is the default of Handler.ReadBodyTimeout.
const DefaultReadBodyTimeout = 10 * time.Second

const (
	// smallBody: a body declared up to this size is read into a buffer of
	// its size, allocated rather than recycled (recycling copies the
	// placeholders' values out, see exchange.recycle, and for small bodies
	// that costs more than the allocation).
	smallBody = 4 << 10
	// firstChunk is the most the handler allocates for a body before its
	// bytes arrive.
	firstChunk = 16 << 10
	// Recycled buffers come in size classes: firstChunk, then every power of
	// two from 64 KiB to maxPooled (8 MiB). A larger body gets a buffer of
	// its own.
	minClassShift = 16
	maxClassShift = 23
	maxPooled     = 1 << maxClassShift
	classes       = 2 + maxClassShift - minClassShift
)

var (
	// errBodyTooLarge is a body over MaxRequestBody.
	errBodyTooLarge = errors.New("request body too large")
	// errBodyTimeout is a body that did not arrive within ReadBodyTimeout.
	errBodyTimeout = errors.New("request body did not arrive in time")
)

// bodyBuffers are the recycled buffers, by size class.
var bodyBuffers [classes]sync.Pool // of *[]byte

// classOf is the size class of a buffer able to hold n bytes, and its
// capacity; class -1 is not recycled.
func classOf(n int) (class, size int) {
	switch {
	case n <= firstChunk:
		return 0, firstChunk
	case n > maxPooled:
		return -1, n
	}
	shift := max(bits.Len(uint(n-1)), minClassShift)
	return 1 + shift - minClassShift, 1 << shift
}

// getBuffer returns a buffer able to hold n bytes.
func getBuffer(n int) *[]byte {
	class, size := classOf(n)
	if class >= 0 {
		if p, _ := bodyBuffers[class].Get().(*[]byte); p != nil {
			return p
		}
	}
	b := make([]byte, size)
	return &b
}

// putBuffer recycles a buffer got from getBuffer.
func putBuffer(p *[]byte) {
	if class, size := classOf(cap(*p)); class >= 0 && size == cap(*p) {
		bodyBuffers[class].Put(p)
	}
}

// readBody reads the whole body, refusing one over max bytes without reading
// past max+1. pooled is the recycled buffer holding body, or nil.
func readBody(r *http.Request, max int64) (body []byte, pooled *[]byte, err error) {
	declared := r.ContentLength
	if declared > max {
		return nil, nil, errBodyTooLarge
	}
	if declared >= 0 && declared <= smallBody {
		body = make([]byte, declared)
		_, err = io.ReadFull(r.Body, body)
		return body, nil, err
	}
	// limit is the most the buffer must hold: the declared length, or max
	// (one byte more proves the body too large).
	limit := int(max)
	if declared >= 0 {
		limit = int(declared)
	}
	pooled = getBuffer(min(limit, firstChunk))
	n := 0
	for {
		room := min(cap(*pooled), limit)
		if n == room {
			if n == limit {
				break
			}
			pooled = grow(pooled, n, limit)
			room = min(cap(*pooled), limit)
		}
		var m int
		m, err = r.Body.Read((*pooled)[n:room])
		n += m
		if err != nil {
			break
		}
	}
	switch {
	case err == io.EOF:
		err = nil
	case err == nil && declared < 0:
		// Full at max, with the length unknown: one more byte is too many.
		var probe [1]byte
		if m, perr := io.ReadAtLeast(r.Body, probe[:], 1); m > 0 {
			err = errBodyTooLarge
		} else if perr != io.EOF {
			err = perr
		}
	}
	if err != nil {
		putBuffer(pooled)
		return nil, nil, err
	}
	return (*pooled)[:n], pooled, nil
}

// grow returns a buffer holding the first n bytes of p, with room for more:
// four times as much while small, then twice (memory stays within twice the
// bytes received), never beyond limit. p is recycled.
func grow(p *[]byte, n, limit int) *[]byte {
	want := 2 * cap(*p)
	if cap(*p) < 64<<10 {
		want = 4 * cap(*p)
	}
	q := getBuffer(min(want, limit))
	copy(*q, (*p)[:n])
	putBuffer(p)
	return q
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// bodyReader is a read body given back to the request, byte for byte. It
// notes when the upstream's transport is done with it: once Close has
// returned, no Read is under way, and none will read the buffer again, so
// the buffer may be recycled. (A transport may close a body from another
// goroutine than the one reading it. Reads copy under the lock, and it has
// no WriteTo, which would hold the lock while writing to the network.)
type bodyReader struct {
	mu     sync.Mutex
	r      bytes.Reader
	closed atomic.Bool
}

func (b *bodyReader) Reset(body []byte) { b.r.Reset(body) }

func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *bodyReader) Close() error {
	b.mu.Lock()
	b.closed.Store(true)
	b.mu.Unlock()
	return nil
}
