// Package reqbody reads a request's body. Memory follows the bytes
// received, never the length a client declares: a client that declares
// 4 MiB and sends a byte a second holds a buffer of 16 KiB, not 4 MiB, and
// the buffer grows only as bytes arrive. A body that takes longer than its
// Limits' Timeout is cut.
//
// A body is read whole (Read), or, when its head decides, streamed to the
// upstream while a goroutine reads and validates the rest (Stream). The
// buffers holding bodies are recycled (Get, Put) once nothing reads them:
// a Reader, or a Stream, given to the upstream's transport says when it is
// done with the body.
package reqbody

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrTooLarge is a body over its Limits' Max, or over a limit Caddy
	// enforces (its request_body directive).
	ErrTooLarge = errors.New("request body too large")
	// ErrTimeout is a body that did not arrive within its Limits' Timeout.
	ErrTimeout = errors.New("request body did not arrive in time")
)

// Limits bound a body: its bytes, the time it may take to arrive (from
// when its reading starts), and the messages of a batch (a streamed body's
// scan parses them).
type Limits struct {
	Max      int64
	Timeout  time.Duration
	MaxBatch int
}

// Read reads r's whole body within l, refusing one over l.Max bytes
// without reading past l.Max+1. The read deadline is the connection's
// (HTTP/1) or the stream's (HTTP/2) under w; it is lifted once the body is
// in, so that it cannot end the response, however long that streams.
// pooled is the recycled buffer holding body (Put it back once nothing
// reads body), or nil.
func Read(w http.ResponseWriter, r *http.Request, l Limits) (body []byte, pooled *[]byte, err error) {
	deadline := setReadDeadline(w, time.Now().Add(l.Timeout))
	body, pooled, err = readAll(r, l.Max)
	if deadline {
		setReadDeadline(w, time.Time{})
	}
	if err != nil {
		return nil, nil, readError(err, deadline)
	}
	return body, pooled, nil
}

// readAll reads the whole body, refusing one over max bytes without
// reading past max+1.
func readAll(r *http.Request, max int64) (body []byte, pooled *[]byte, err error) {
	declared := r.ContentLength
	if declared > max {
		return nil, nil, ErrTooLarge
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
	pooled = Get(min(limit, firstChunk))
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
			err = ErrTooLarge
		} else if perr != io.EOF {
			err = perr
		}
	}
	if err != nil {
		Put(pooled)
		return nil, nil, err
	}
	return (*pooled)[:n], pooled, nil
}

// readError names what a failed read of the body means: a body over a
// limit Caddy enforces (its request_body directive), a deadline passed, or
// a broken connection.
func readError(err error, deadline bool) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return ErrTooLarge
	case deadline && isTimeout(err):
		return ErrTimeout
	}
	return err
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// setReadDeadline sets the read deadline of the connection (or HTTP/2
// stream) under w, as http.ResponseController does, without allocating one
// per request, and reports whether it could.
func setReadDeadline(w http.ResponseWriter, t time.Time) bool {
	for {
		switch v := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return v.SetReadDeadline(t) == nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return false
		}
	}
}

// Reader is a read body given back to the request, byte for byte. It
// notes when the upstream's transport is done with it: once Close has
// returned, no Read is under way, and none will read the buffer again, so
// the buffer may be recycled. (A transport may close a body from another
// goroutine than the one reading it. Reads copy under the lock, and it has
// no WriteTo, which would hold the lock while writing to the network.)
type Reader struct {
	mu     sync.Mutex
	r      bytes.Reader
	closed atomic.Bool
}

// Reset gives body to read, from its start.
func (b *Reader) Reset(body []byte) { b.r.Reset(body) }

func (b *Reader) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

// Close is the transport done with the body.
func (b *Reader) Close() error {
	b.mu.Lock()
	b.closed.Store(true)
	b.mu.Unlock()
	return nil
}

// Closed reports whether Close was called: nothing reads the body now.
func (b *Reader) Closed() bool { return b.closed.Load() }
