// Package logsample bounds what repeated events cost a log. The first event
// of each kind is logged at once; the events of that kind that follow
// within an interval are only counted, and their number is logged once the
// interval is over, on one line. A storm of one kind thus costs a line per
// interval however many events it brings, and a kind not seen in the last
// interval is logged at once, so that nothing new is hidden in a storm.
//
// Unlike zap's sampler (Caddy's log sampling), which tells lines apart by
// their level and message only and drops those over its quota without a
// trace in the log, a Sampler tells kinds apart by whatever its caller
// names them by, and counts every event it does not log: the events logged
// and the counts reported add up to the events noted.
//
// It knows nothing of what the events are: its caller names their kinds,
// writes the line of each event the Sampler lets through, and writes the
// line of each count the Sampler reports.
package logsample

import (
	"sync"
	"time"
)

// Count is a number of events of one kind that were noted and not logged.
type Count[K comparable] struct {
	Kind K
	// N is how many, since the last line of Kind.
	N int64
	// Overflow says that Kind is a coarse kind, which counted the events of
	// fine kinds the Sampler had no room for.
	Overflow bool
}

// Sampler decides which events of a kind are logged. It holds at most max
// fine kinds at once: an event of a new fine kind while it is full is
// counted under the coarse kind its caller gives with it, which must come
// from a small set (a coarse kind is held like a fine one, without a
// bound). Its clock is the runtime's: tests move it with testing/synctest.
// It is safe for concurrent use.
type Sampler[K comparable] struct {
	interval time.Duration
	max      int
	report   func(Count[K])

	mu     sync.Mutex
	fine   map[K]*window
	coarse map[K]*window
	// timer sweeps the windows every interval while any is held; nil when
	// none is.
	timer   *time.Timer
	stopped bool
}

// window is the current interval of a kind: no line of the kind is logged
// before end, and n events of it were counted since its last line.
type window struct {
	end time.Time
	n   int64
}

// New returns a Sampler that logs a kind at most once per interval and
// holds at most max fine kinds. It calls report, from its timer or from
// Stop, with each count to log, in no particular order, never while it
// holds its lock.
func New[K comparable](interval time.Duration, max int, report func(Count[K])) *Sampler[K] {
	return &Sampler[K]{
		interval: interval,
		max:      max,
		report:   report,
		fine:     make(map[K]*window),
		coarse:   make(map[K]*window),
	}
}

// Note records an event of kind k, and says whether its line is to be
// logged: it is when no line of its kind was logged within the last
// interval. Otherwise the event is counted, and its count reported once the
// interval is over. When the Sampler holds max fine kinds already, an event
// of a kind it does not hold counts as one of coarse, and overflow is true.
func (s *Sampler[K]) Note(k, coarse K) (log, overflow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return true, false
	}
	kinds := s.fine
	if _, held := kinds[k]; !held && len(kinds) >= s.max {
		kinds, k, overflow = s.coarse, coarse, true
	}
	if w, held := kinds[k]; held {
		w.n++
		return false, overflow
	}
	kinds[k] = &window{end: time.Now().Add(s.interval)}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.interval, s.sweep)
	}
	return true, overflow
}

// sweep ends the windows that are over: a window with events counted is
// reported and opens the kind's next interval; one without is forgotten,
// so that the kind's next event is logged at once.
func (s *Sampler[K]) sweep() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	due := s.endWindows(s.fine, false, now, nil)
	due = s.endWindows(s.coarse, true, now, due)
	if len(s.fine)+len(s.coarse) > 0 {
		s.timer.Reset(s.interval)
	} else {
		s.timer = nil
	}
	s.mu.Unlock()
	for _, c := range due {
		s.report(c)
	}
}

// endWindows ends the windows of kinds that are over at now, and appends
// the counts to report to due.
func (s *Sampler[K]) endWindows(kinds map[K]*window, overflow bool, now time.Time, due []Count[K]) []Count[K] {
	for k, w := range kinds {
		switch {
		case now.Before(w.end):
		case w.n == 0:
			delete(kinds, k)
		default:
			due = append(due, Count[K]{Kind: k, N: w.n, Overflow: overflow})
			w.n, w.end = 0, now.Add(s.interval)
		}
	}
	return due
}

// Stop reports every count not yet reported, and lets every event noted
// after it be logged: it is for when whoever reads the counts is going
// away (a config being unloaded), while events may still come.
func (s *Sampler[K]) Stop() {
	s.mu.Lock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	var due []Count[K]
	for k, w := range s.fine {
		if w.n > 0 {
			due = append(due, Count[K]{Kind: k, N: w.n})
		}
	}
	for k, w := range s.coarse {
		if w.n > 0 {
			due = append(due, Count[K]{Kind: k, N: w.n, Overflow: true})
		}
	}
	clear(s.fine)
	clear(s.coarse)
	s.mu.Unlock()
	for _, c := range due {
		s.report(c)
	}
}
