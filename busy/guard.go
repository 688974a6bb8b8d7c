package busy

import (
	"context"
	"sync"
	"time"
)

// Guard admits holders of at most Max places at once; up to Queue more
// callers wait, in arrival order, each at most QueueTimeout. It is safe for
// concurrent use.
type Guard struct {
	// mu is own for a Guard of its own, or the lock of the Set shard that
	// holds the guard, so that a keyed guard can drop itself when idle.
	mu     *sync.Mutex
	own    sync.Mutex
	limits Limits
	// active is the places held.
	active  int
	queue   queue
	service service

	// A guard in a Set knows where it is held.
	shard *shard
	key   string
}

// Stats is a snapshot of a guard.
type Stats struct {
	// Active is the number of places held.
	Active int
	// Queued is the number of waiters.
	Queued int
	// Max and Queue are the guard's Limits.
	Max, Queue int
	// RecentService is the recent average time from admission to Release
	// (see the package documentation); zero until a first Release.
	RecentService time.Duration
}

// NewGuard returns a Guard with no holders, under l, which must be valid.
func NewGuard(l Limits) *Guard {
	g := &Guard{limits: l}
	g.mu = &g.own
	return g
}

// SetLimits applies l, which must be valid, at once: a raised Max admits
// waiters; a lowered one admits no one until enough holders have released.
// Waiters beyond a lowered Queue keep their places, and waiters keep the
// QueueTimeout they arrived under.
func (g *Guard) SetLimits(l Limits) {
	g.mu.Lock()
	g.setLimits(l)
	g.mu.Unlock()
}

// Acquire returns a Slot when a place is free, or when the caller's turn in
// the queue comes. It returns a *Shed when the queue is full or the wait
// exceeds QueueTimeout, and ctx.Err() when ctx ends first; the caller then
// leaves the queue at once. An ended ctx still gets a place that is free
// without waiting. A place free at once is taken at time.Now.
func (g *Guard) Acquire(ctx context.Context) (Slot, error) {
	return g.AcquireNAt(ctx, time.Now(), 1)
}

// AcquireAt is Acquire for a caller that has just read the clock: now is
// when a place free at once is taken. A place that comes from the queue is
// taken when it is handed over: at the time of the Release that frees it
// (the time passed to ReleaseAt, or time.Now), or at time.Now when SetLimits
// or a waiter giving up passes it on.
func (g *Guard) AcquireAt(ctx context.Context, now time.Time) (Slot, error) {
	return g.AcquireNAt(ctx, now, 1)
}

// AcquireNAt is AcquireAt for n places at once, all or nothing, such as one
// per message of a batch that is served concurrently. The caller waits in
// the queue, as one waiter, until n places are free for it. A caller asking
// for more than Max places is shed at once with TooMany, since it could never
// be admitted; n below 1 counts as 1.
func (g *Guard) AcquireNAt(ctx context.Context, now time.Time, n int) (Slot, error) {
	g.mu.Lock()
	return g.acquire(ctx, now, max(n, 1))
}

// Stats returns a snapshot of g.
func (g *Guard) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats()
}

// Slot is the places held in a Guard by one caller. Release it through the
// variable Acquire returned it in: a copy is the same places, and releasing
// both would free them twice.
type Slot struct {
	g     *Guard
	start time.Time
	n     int
}

// Start is when the place was taken: for a caller that waited in the
// queue, when it was handed over; zero for the zero Slot.
func (s *Slot) Start() time.Time { return s.start }

// Release frees the places and records their service time, up to
// time.Now. Later calls, and a call on the zero Slot, do nothing.
func (s *Slot) Release() {
	if s.g != nil {
		s.ReleaseAt(time.Now())
	}
}

// ReleaseAt is Release for a caller that has just read the clock: now is
// when the service ended.
func (s *Slot) ReleaseAt(now time.Time) {
	g := s.g
	if g == nil {
		return
	}
	s.g = nil
	g.mu.Lock()
	g.service.record(now.Sub(s.start))
	g.free(now, s.n)
	g.mu.Unlock()
}

// acquire is AcquireNAt with g.mu held; it unlocks g.mu.
func (g *Guard) acquire(ctx context.Context, now time.Time, n int) (Slot, error) {
	if g.active+n <= g.limits.Max && g.queue.len == 0 {
		g.active += n
		g.mu.Unlock()
		return Slot{g: g, start: now, n: n}, nil
	}
	if n > g.limits.Max {
		shed := g.shed(TooMany)
		g.settle()
		g.mu.Unlock()
		return Slot{}, shed
	}
	if err := ctx.Err(); err != nil {
		g.mu.Unlock()
		return Slot{}, err
	}
	if g.queue.len >= g.limits.Queue {
		shed := g.shed(QueueFull)
		g.mu.Unlock()
		return Slot{}, shed
	}
	w := &waiter{ready: make(chan struct{}), n: n}
	g.queue.push(w)
	// Started before unlocking, so that a waiter seen in Stats has its
	// timeout running. The waiter itself expires when it fires: the guard
	// runs no goroutine of its own, where a panic would stop the process.
	timer := time.NewTimer(g.limits.QueueTimeout)
	g.mu.Unlock()
	return g.wait(ctx, w, timer)
}

// wait blocks until w is granted a place or shed, or ctx ends.
func (g *Guard) wait(ctx context.Context, w *waiter, timer *time.Timer) (Slot, error) {
	defer timer.Stop()
	select {
	case <-w.ready:
		return w.outcome(g)
	case <-timer.C:
		g.expire(w)
		// Shed, or granted a place just before: either way, ready.
		<-w.ready
		return w.outcome(g)
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch w.state {
	case waiting:
		g.queue.remove(w)
		// The timeout may fire before it is stopped; it must find w gone.
		w.state = left
		g.settle()
	case granted:
		// The places came as the caller gave up: pass them on.
		g.free(time.Now(), w.n)
	case expired:
		return w.outcome(g)
	}
	return Slot{}, ctx.Err()
}

// expire sheds w if it is still waiting: its timeout fired.
func (g *Guard) expire(w *waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.state != waiting {
		return
	}
	g.queue.remove(w)
	w.state, w.shed = expired, g.shed(WaitExceeded)
	close(w.ready)
	g.settle()
}

// free gives up n held places at now, and admits the waiters they make room
// for.
func (g *Guard) free(now time.Time, n int) {
	g.active -= n
	g.admit(now)
	g.settle()
}

// admit grants places to waiters from the head of the queue, while the head
// fits under Max. Admission is strictly in order: a waiter asking for more
// places than are free keeps those behind it waiting, so a caller asking for
// many is not starved by callers asking for one.
func (g *Guard) admit(now time.Time) {
	for g.queue.len > 0 && g.active+g.queue.head.n <= g.limits.Max {
		w := g.queue.pop()
		g.active += w.n
		w.grant(now)
	}
}

// settle drops g from its Set when it has neither holders nor waiters.
func (g *Guard) settle() {
	if g.shard != nil && g.active == 0 && g.queue.len == 0 {
		g.shard.drop(g)
	}
}

func (g *Guard) setLimits(l Limits) {
	g.limits = l
	if g.queue.len == 0 {
		return
	}
	// Waiters asking for more places than the new Max could never be
	// admitted: they are shed now rather than at their timeout.
	for w := g.queue.head; w != nil; {
		next := w.next
		if w.n > l.Max {
			g.queue.remove(w)
			w.state, w.shed = expired, g.shed(TooMany)
			close(w.ready)
		}
		w = next
	}
	g.admit(time.Now())
	g.settle()
}

func (g *Guard) shed(r Reason) *Shed {
	return &Shed{
		Reason:     r,
		Active:     g.active,
		Queued:     g.queue.len,
		RetryAfter: g.service.retryAfter(g.queue.len, g.limits),
	}
}

func (g *Guard) stats() Stats {
	return Stats{
		Active:        g.active,
		Queued:        g.queue.len,
		Max:           g.limits.Max,
		Queue:         g.limits.Queue,
		RecentService: g.service.mean,
	}
}
