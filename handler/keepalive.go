package handler

import (
	"net/http"
	"sync"
	"time"
)

// DefaultSSEKeepalive is the default of Handler.SSEKeepalive.
const DefaultSSEKeepalive = 25 * time.Second

// keepalive sends an SSE comment line (":\n") on an event stream the
// upstream leaves idle, so that load balancers and clients that cut idle
// connections keep a standalone GET stream, or a long tool call's stream,
// open. Clients ignore comment lines. It only ever writes at a line
// boundary, and never a blank line, so it can neither end an event early nor
// split one.
type keepalive struct {
	// mu serialises writes to the client between the proxy and the ticker.
	mu sync.Mutex
	// wrote: the upstream wrote since the last tick.
	wrote bool
	// midLine: the last byte written did not end a line for certain.
	midLine bool
	stop    chan struct{}
	done    chan struct{}
}

// startKeepalive begins the ticker for an event stream.
func (u *upstreamWatch) startKeepalive(every time.Duration) {
	ka := &keepalive{stop: make(chan struct{}), done: make(chan struct{})}
	u.ka = ka
	w := u.ResponseWriterWrapper.ResponseWriter
	go func() {
		defer close(ka.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ka.stop:
				return
			case <-t.C:
			}
			ka.mu.Lock()
			if !ka.wrote && !ka.midLine {
				if _, err := w.Write([]byte(":\n")); err == nil {
					_ = http.NewResponseController(w).Flush()
				}
			}
			ka.wrote = false
			ka.mu.Unlock()
		}
	}()
}

// stopKeepalive ends the ticker and waits for it, so that nothing is written
// to the client once the handler writes its own bytes or returns.
func (u *upstreamWatch) stopKeepalive() {
	if ka := u.ka; ka != nil {
		u.ka = nil
		close(ka.stop)
		<-ka.done
	}
}

// write sends p to the client, noting it for the keepalive.
func (u *upstreamWatch) write(p []byte) (int, error) {
	if u.drain && u.left() {
		return len(p), nil
	}
	ka := u.ka
	if ka == nil {
		return u.drained(p, u.ResponseWriterWrapper.Write)
	}
	ka.mu.Lock()
	defer ka.mu.Unlock()
	if len(p) > 0 {
		ka.wrote = true
		// A CR at the end of a write is not yet a line boundary: its LF may
		// start the next write, and a comment line between the two would
		// turn that LF into a blank line, which ends the event.
		ka.midLine = p[len(p)-1] != '\n'
	}
	return u.drained(p, u.ResponseWriterWrapper.Write)
}

// left reports whether the client is gone: its request ended, or a write to
// it failed.
func (u *upstreamWatch) left() bool {
	u.gone = u.gone || u.x.r.Context().Err() != nil
	return u.gone
}

// drained writes p with write, and reports the outcome as the proxy should
// see it: when the answer is drained, a failed write means the client is
// gone, and the proxy goes on reading the upstream as if it had succeeded.
func (u *upstreamWatch) drained(p []byte, write func([]byte) (int, error)) (int, error) {
	n, err := write(p)
	if err != nil && u.drain {
		u.gone = true
		return len(p), nil
	}
	return n, err
}

// flush flushes to the client, after any keepalive write in progress.
func (u *upstreamWatch) flush() error {
	if u.drain && u.left() {
		return nil
	}
	if ka := u.ka; ka != nil {
		ka.mu.Lock()
		defer ka.mu.Unlock()
	}
	err := http.NewResponseController(u.ResponseWriterWrapper.ResponseWriter).Flush()
	if err != nil && u.drain {
		u.gone = true
		return nil
	}
	return err
}
