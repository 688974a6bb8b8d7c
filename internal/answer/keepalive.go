package answer

import (
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/internal/sse"
)

// siteKeepalive is where a panic of the keep-alives' goroutine is
// recovered (package panics).
const siteKeepalive = "keepalive"

// keepalive sends an SSE comment line (":\n") on an event stream the
// upstream leaves idle, so that load balancers and clients that cut idle
// connections keep a standalone GET stream, or a long tool call's stream,
// open. Clients ignore comment lines. It only ever writes after a line
// feed, and never a blank line, so it can neither end an event early nor
// split one. A nil keepalive does nothing: its writes and flushes go
// straight through.
type keepalive struct {
	// mu serialises writes to the client between the proxy and the ticker.
	mu sync.Mutex
	// wrote: the upstream wrote since the last tick.
	wrote bool
	// midLine: the last byte written did not end a line for certain.
	midLine bool
	done    chan struct{}
	stopped chan struct{}
}

// startKeepalive begins writing to w every time it has been idle for a
// tick; a panic is logged to logger (nil: Caddy's default one).
func startKeepalive(w http.ResponseWriter, every time.Duration, logger *zap.Logger) *keepalive {
	ka := &keepalive{done: make(chan struct{}), stopped: make(chan struct{})}
	go ka.run(w, every, logger)
	return ka
}

// run writes the keep-alives, on a goroutine of its own. A panic of the
// writer under it (another handler's, in front of this one) ends the
// keep-alives, and the stream goes on without them.
func (ka *keepalive) run(w http.ResponseWriter, every time.Duration, logger *zap.Logger) {
	defer close(ka.stopped)
	defer panics.Recover(logger, siteKeepalive)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ka.done:
			return
		case <-t.C:
		}
		ka.tick(w)
	}
}

// tick writes a keep-alive to w when the stream was idle since the last
// tick. The lock is given back however the write ends: the stream's own
// writes wait for it.
func (ka *keepalive) tick(w http.ResponseWriter) {
	ka.mu.Lock()
	defer ka.mu.Unlock()
	if !ka.wrote && !ka.midLine {
		if _, err := w.Write(sse.KeepAlive); err == nil {
			_ = http.NewResponseController(w).Flush()
		}
	}
	ka.wrote = false
}

// stop ends the ticker and waits for it, so that nothing is written to the
// client once the handler writes its own bytes or returns.
func (ka *keepalive) stop() {
	if ka == nil {
		return
	}
	close(ka.done)
	<-ka.stopped
}

// write writes p with write, in step with the ticker, noting where the
// stream stands.
func (ka *keepalive) write(p []byte, write func([]byte) (int, error)) (int, error) {
	if ka == nil {
		return write(p)
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
	return write(p)
}

// flush flushes with flush, after any write of the ticker in progress.
func (ka *keepalive) flush(flush func() error) error {
	if ka != nil {
		ka.mu.Lock()
		defer ka.mu.Unlock()
	}
	return flush()
}
