package handler

import (
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
// the bytes of their keys and new ids (maxReopenedID each at most);
// past either, a lost session is reopened by each request that meets it.
const (
	maxReopensHeld = 4096
	maxReopenBytes = 4 << 20
)

// reopenFlights are the reopens of a handler, by the upstream session they
// replace (newReopenFlights).
type reopenFlights struct {
	mu    sync.Mutex
	m     map[string]*reopenFlight
	bytes int
	now   func() time.Time
}

func newReopenFlights() *reopenFlights {
	return &reopenFlights{m: make(map[string]*reopenFlight), now: time.Now}
}

// reopenFlight is one reopen: done is closed once id, init and err say how
// it went, at ended.
type reopenFlight struct {
	key   string
	done  chan struct{}
	id    string
	init  *http.Request
	err   error
	ended time.Time
}

// join returns the reopen of the upstream session old (named by its
// upstream and id): one under way, or one that ended recently and opened
// a session, or, with lead true, a new one the caller runs and ends with
// finish (in place of one that failed).
func (f *reopenFlights) join(old string) (flight *reopenFlight, lead bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if fl, ok := f.m[old]; ok && (!fl.over() || (fl.err == nil && now.Sub(fl.ended) < reopenRemembered)) {
		return fl, false
	}
	fl := &reopenFlight{done: make(chan struct{}), key: old}
	if prev, ok := f.m[old]; ok {
		f.m[old] = fl // in place of one long over
		f.bytes -= len(prev.id)
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
func (f *reopenFlights) finish(fl *reopenFlight, id string, init *http.Request, err error) {
	f.mu.Lock()
	fl.id, fl.init, fl.err, fl.ended = id, init, err, f.now()
	if f.m[fl.key] == fl {
		f.bytes += len(id)
	}
	f.mu.Unlock()
	close(fl.done)
}

// over reports whether the flight ended; f.mu is held.
func (fl *reopenFlight) over() bool { return !fl.ended.IsZero() }

// sweep forgets the reopens that ended longer ago than reopenRemembered,
// when the map is full; f.mu is held.
func (f *reopenFlights) sweep(now time.Time) {
	if len(f.m) < maxReopensHeld && f.bytes < maxReopenBytes {
		return
	}
	for old, fl := range f.m {
		if fl.over() && now.Sub(fl.ended) >= reopenRemembered {
			delete(f.m, old)
			f.bytes -= len(old) + len(fl.id)
		}
	}
}
