package own

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// One reopen per lost session on a node. A client's requests of one
// session often meet the restarted server's 404 together: its standalone
// GET stream reconnecting and its next call. Each reopening on its own
// would leave them in different upstream sessions, the GET listening on
// one that nothing else uses: the half-dead session. The first to meet
// the 404 reopens; the others of the same old session wait for it and are
// sent again under the session it opened, as are those that meet the 404
// shortly after (their request was on its way while the reopen ran).

// reopenRemembered is how long a reopen's outcome answers the requests of
// the old session that meet its 404 after it ended.
const reopenRemembered = 30 * time.Second

// maxReopensHeld bounds the reopens a node remembers, and maxReopenBytes
// the bytes of their keys and new ids (MaxSessionID each at most);
// past either, a lost session is reopened by each request that meets it.
const (
	maxReopensHeld = 4096
	maxReopenBytes = 4 << 20
)

// Flights are the reopens of a handler, by the upstream session they
// replace (NewFlights).
type Flights struct {
	mu    sync.Mutex
	m     map[string]*Flight
	bytes int
	now   func() time.Time
}

func NewFlights() *Flights {
	return &Flights{m: make(map[string]*Flight), now: time.Now}
}

// Flight is one reopen: done is closed once ID, Init and err say how it
// went, at ended: the new session's id, and the initialize that opened
// it.
type Flight struct {
	key   string
	done  chan struct{}
	ID    string
	Init  *http.Request
	err   error
	ended time.Time
}

// join returns the reopen of the upstream session old (named by its
// upstream and id): one under way, or one that ended recently and opened
// a session, or, with lead true, a new one the caller runs and ends with
// finish (in place of one that failed).
func (f *Flights) join(old string) (flight *Flight, lead bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if fl, ok := f.m[old]; ok && (!fl.over() || (fl.err == nil && now.Sub(fl.ended) < reopenRemembered)) {
		return fl, false
	}
	fl := &Flight{done: make(chan struct{}), key: old}
	if prev, ok := f.m[old]; ok {
		f.m[old] = fl // in place of one long over
		f.bytes -= len(prev.ID)
		return fl, true
	}
	f.sweep(now)
	if len(f.m) < maxReopensHeld && f.bytes+len(old) <= maxReopenBytes {
		f.m[old] = fl
		f.bytes += len(old)
	}
	return fl, true
}

// finish ends a flight the caller led. The new session's id counts in the
// bytes remembered.
func (f *Flights) finish(fl *Flight, id string, init *http.Request, err error) {
	f.mu.Lock()
	fl.ID, fl.Init, fl.err, fl.ended = id, init, err, f.now()
	if f.m[fl.key] == fl {
		f.bytes += len(id)
	}
	f.mu.Unlock()
	close(fl.done)
}

// over reports whether the flight ended; f.mu is held.
func (fl *Flight) over() bool { return !fl.ended.IsZero() }

// sweep forgets the reopens that ended longer ago than reopenRemembered,
// when the map is full; f.mu is held.
func (f *Flights) sweep(now time.Time) {
	if len(f.m) < maxReopensHeld && f.bytes < maxReopenBytes {
		return
	}
	for old, fl := range f.m {
		if fl.over() && now.Sub(fl.ended) >= reopenRemembered {
			delete(f.m, old)
			f.bytes -= len(old) + len(fl.ID)
		}
	}
}

// Reopen reopens the upstream session old names (its upstream and id), with
// open, or joins the reopen of it under way or just ended. A joiner whose
// reopen failed leads one of its own, once: a failure (the server still
// starting, slow to answer) is no answer for the requests that come after
// it. It gives up when ctx ends while it waits.
func (f *Flights) Reopen(ctx context.Context, old string, open func() (id string, init *http.Request, err error)) (*Flight, error) {
	for attempt := 0; ; attempt++ {
		fl, lead := f.join(old)
		if lead {
			id, init, err := open()
			f.finish(fl, id, init, err)
			return fl, err
		}
		select {
		case <-fl.done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if fl.err == nil || attempt > 0 {
			return fl, fl.err
		}
	}
}
