package answer

import (
	"context"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// Delivery is what the upstream's transport told of a request: its
// headers went out (sending), then all of it did (reached), or its write
// failed; written is closed once the write ended, either way. Only a
// request that reached the upstream is cancelled there.
type Delivery struct {
	sending, reached, ended atomic.Bool
	written                 chan struct{}
}

// Trace has the upstream request whose context is ctx tell d of its
// delivery.
func (d *Delivery) Trace(ctx context.Context) context.Context {
	d.written = make(chan struct{})
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: d.wroteHeaders, WroteRequest: d.wroteRequest})
}

func (d *Delivery) wroteHeaders() { d.sending.Store(true) }

// wroteRequest is told of each attempt to write the request; the first
// ends the wait.
func (d *Delivery) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		d.reached.Store(true)
	}
	if d.ended.CompareAndSwap(false, true) {
		close(d.written)
	}
}

// Settled reports whether the request reached the upstream, waiting at
// most wait for a request whose headers went out to be written whole: the
// transport tells of a body written only once the upstream may have read
// it, and begun the call, already.
func (d *Delivery) Settled(wait time.Duration) bool {
	if d.written != nil && d.sending.Load() && !d.reached.Load() {
		t := time.NewTimer(wait)
		select {
		case <-d.written:
		case <-t.C:
		}
		t.Stop()
	}
	return d.reached.Load()
}

// Reached reports whether the request reached the upstream.
func (d *Delivery) Reached() bool { return d.reached.Load() }
