package reqbody

import "io"

// The bytes of a streamed body, from the client to the scan, and from the
// scan to the upstream's transport.

// More gives the scan the bytes that arrived, first letting the upstream
// have those it has read inside the open message.
func (b *Stream) More(read int, open bool) ([]byte, bool) {
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
func (b *Stream) receive() bool {
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

// grow moves the bytes received to a larger buffer, as Read grows its
// own. The buffer left behind is retired: what the scan learned (a method,
// an id, the head) may point into it.
func (b *Stream) grow() {
	q := Get(grown(cap(*b.buf), b.limit))
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

// Recycle gives back the buffers the body outgrew, once the scan is over
// and nothing reads the messages it parsed (Buffer, the last, is the
// caller's to give back).
func (b *Stream) Recycle() {
	for i := range b.nRetired {
		Put(b.retired[i])
		b.retired[i] = nil
	}
	b.nRetired = 0
}

// Read gives the upstream's transport what it may have of the body,
// waiting for more, and fails once the body is refused.
func (b *Stream) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.sent == b.safe && !b.ended && !b.closed {
		b.cond.Wait()
	}
	switch {
	case b.closed:
		return 0, io.EOF
	case b.ended && b.err != nil:
		return 0, ErrRefused
	case b.sent < b.safe:
		n := copy(p, (*b.buf)[b.sent:b.safe])
		b.sent += n
		return n, nil
	}
	return 0, io.EOF
}

// Close is the transport done with the body.
func (b *Stream) Close() error {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	return nil
}

// Closed reports whether the transport is done with the body.
func (b *Stream) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}
