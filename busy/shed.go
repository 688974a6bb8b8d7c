package busy

import (
	"fmt"
	"math"
	"time"
)

// Reason is why a caller was shed.
type Reason int

const (
	// QueueFull means every place was held and the queue was full, or
	// Queue is 0.
	QueueFull Reason = iota + 1
	// WaitExceeded means the caller waited QueueTimeout without being
	// admitted.
	WaitExceeded
	// TooMany means the caller asked for more places than Max: it can never
	// be admitted.
	TooMany
)

// String returns the reason in words: "queue full" or "wait exceeded".
func (r Reason) String() string {
	switch r {
	case QueueFull:
		return "queue full"
	case WaitExceeded:
		return "wait exceeded"
	case TooMany:
		return "more places than max"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Shed is the error of a refused Acquire.
type Shed struct {
	// Reason is why the caller was refused.
	Reason Reason
	// Active is the number of holders at the moment of refusal.
	Active int
	// Queued is the number of waiters at the moment of refusal, not
	// counting the refused caller.
	Queued int
	// RetryAfter estimates when a place will be free for the caller (see
	// the package documentation); at least a second. The caller rounds
	// it as its protocol needs.
	RetryAfter time.Duration
}

// Error describes the refusal, such as "busy: queue full (4 active, 8
// queued); retry after 3s".
func (s *Shed) Error() string {
	return fmt.Sprintf("busy: %v (%d active, %d queued); retry after %v", s.Reason, s.Active, s.Queued, s.RetryAfter)
}

// minRetryAfter is the least RetryAfter: a sooner retry would most likely
// be refused again, and HTTP's Retry-After counts whole seconds.
const minRetryAfter = time.Second

// serviceWeight is the inverse of the weight of one service time in the
// recent average: each Release counts for one eighth.
const serviceWeight = 8

// service is the recent service time of a guard.
type service struct {
	mean  time.Duration
	known bool // false until a first Release
}

// record adds a service time d to the average; a negative d, from a clock
// gone backwards, counts as 0.
func (s *service) record(d time.Duration) {
	d = max(d, 0)
	if !s.known {
		s.mean, s.known = d, true
		return
	}
	s.mean += (d - s.mean) / serviceWeight
}

// retryAfter estimates when a place is free for a caller behind queued
// waiters, under l.
func (s service) retryAfter(queued int, l Limits) time.Duration {
	if !s.known {
		return max(l.QueueTimeout, minRetryAfter)
	}
	ahead := time.Duration(queued + 1)
	if s.mean > math.MaxInt64/ahead {
		return math.MaxInt64
	}
	return max(s.mean*ahead/time.Duration(max(l.Max, 1)), minRetryAfter)
}
