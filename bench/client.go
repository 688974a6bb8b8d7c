package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// client is one keep-alive connection, speaking just enough HTTP/1.1 for the
// benchmark: a fixed request (the target's headers included) with one
// header that varies, and answers with a Content-Length, chunked, or ending
// with the connection. It costs a few microseconds of CPU per request, much
// less than net/http's client, so that the load generator takes as little as
// possible of the CPU the servers measured share with it.
type client struct {
	t    *target
	nc   net.Conn
	br   *bufio.Reader
	head []byte
	// keyAt is where the X-Client value starts in head.
	keyAt int
	key   int
	// stride: client i of n sends keys i, i+n, i+2n, … modulo t.keys.
	stride int
	// seen holds the first bytes of the body being read.
	seen []byte
	// eventAt is when the first event of the answer ended; lastLF says
	// whether the body so far ends with a line feed.
	eventAt   time.Time
	lastLF    bool
	mustClose bool
}

func newClient(t *target, i, n int) *client {
	head := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n%sX-Client: k", t.path, t.addr, len(t.body), t.headers)
	c := &client{t: t, head: head, keyAt: len(head), stride: n, seen: make([]byte, 0, checkBytes)}
	if t.keys > 1 {
		c.key = i % t.keys
	}
	return c
}

func (c *client) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

// run sends requests until to, and keeps those that started at or after
// from and ended by to.
func (c *client) run(from, to time.Time, stop *atomic.Bool) *sample {
	s := &sample{}
	for !stop.Load() {
		t0 := time.Now()
		if !t0.Before(to) {
			break
		}
		err := c.do()
		t1 := time.Now()
		if err != nil {
			if s.Errors == 0 {
				s.FirstError = err.Error()
			}
			s.Errors++
			c.close()
			// A server that is down refuses at once: do not spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.Answered++
		if t0.Before(from) || t1.After(to) {
			continue
		}
		s.Requests++
		if c.t.firstEvent {
			s.hist.record(c.eventAt.Sub(t0))
		} else {
			s.hist.record(t1.Sub(t0))
		}
	}
	return s
}

// errBadAnswer is an answer the target should not have given.
var errBadAnswer = errors.New("unexpected answer")

// do sends one request and reads its whole answer.
func (c *client) do() error {
	if c.nc == nil {
		nc, err := net.Dial("tcp", c.t.addr)
		if err != nil {
			return err
		}
		c.nc, c.br = nc, bufio.NewReaderSize(nc, 32<<10)
	}
	c.head = strconv.AppendInt(c.head[:c.keyAt], int64(c.key), 10)
	c.head = append(c.head, "\r\n\r\n"...)
	if c.t.keys > 1 {
		c.key = (c.key + c.stride) % c.t.keys
	}
	bufs := net.Buffers{c.head, c.t.body}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return err
	}
	status, err := c.readResponse()
	if err != nil {
		return err
	}
	if c.mustClose {
		c.close()
	}
	switch {
	case status != cmp.Or(c.t.status, http.StatusOK):
		return fmt.Errorf("%w: status %d: %q", errBadAnswer, status, c.seen)
	case !bytes.Contains(c.seen, []byte(c.t.expect)):
		return fmt.Errorf("%w: no %q in %q", errBadAnswer, c.t.expect, c.seen)
	case c.t.firstEvent && c.eventAt.IsZero():
		return fmt.Errorf("%w: no server-sent event in %q", errBadAnswer, c.seen)
	}
	return nil
}

// readResponse reads the status line, the headers and the body, handing the
// body to consume as it arrives.
func (c *client) readResponse() (status int, err error) {
	c.seen, c.eventAt, c.lastLF, c.mustClose = c.seen[:0], time.Time{}, false, false
	for {
		status, err = c.readStatus()
		if err != nil || status >= 200 {
			break
		}
		// A 1xx answer comes before the real one.
		if err = c.skipHeaders(); err != nil {
			return 0, err
		}
	}
	if err != nil {
		return 0, err
	}
	length, chunked, err := c.readHeaders()
	switch {
	case err != nil:
		return 0, err
	case status == 204 || status == 304:
		return status, nil
	case chunked:
		return status, c.readChunked()
	case length >= 0:
		return status, c.readN(length)
	}
	c.mustClose = true
	return status, c.readToEOF()
}

func (c *client) readStatus() (int, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	return status, nil
}

func (c *client) skipHeaders() error {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return nil
		}
	}
}

// readHeaders returns the Content-Length (-1 if absent) and whether the
// body is chunked, and notes Connection: close.
func (c *client) readHeaders() (length int64, chunked bool, err error) {
	length = -1
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return length, chunked, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("bad header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			c.mustClose = c.mustClose || bytes.EqualFold(value, []byte("close"))
		}
	}
}

func (c *client) readChunked() error {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad chunk size line %q", line)
		}
		if n == 0 {
			return c.skipHeaders() // the trailer
		}
		if err := c.readN(n); err != nil {
			return err
		}
		if _, err := c.br.Discard(2); err != nil {
			return err
		}
	}
}

// readN reads n bytes of body.
func (c *client) readN(n int64) error {
	for n > 0 {
		p, err := c.br.Peek(int(min(n, int64(c.br.Size()))))
		if len(p) > 0 {
			c.consume(p)
			_, _ = c.br.Discard(len(p))
			n -= int64(len(p))
		}
		if n > 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func (c *client) readToEOF() error {
	buf := make([]byte, 4096)
	for {
		n, err := c.br.Read(buf)
		c.consume(buf[:n])
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// consume takes the next bytes of a body: it keeps the first checkBytes,
// and notes when the first event ends (a blank line).
func (c *client) consume(p []byte) {
	if len(p) == 0 {
		return
	}
	if room := checkBytes - len(c.seen); room > 0 {
		c.seen = append(c.seen, p[:min(room, len(p))]...)
	}
	if c.t.firstEvent && c.eventAt.IsZero() {
		if (c.lastLF && p[0] == '\n') || bytes.Contains(p, []byte("\n\n")) {
			c.eventAt = time.Now()
		}
		c.lastLF = p[len(p)-1] == '\n'
	}
}
