package busy

import "time"

// waitState is where a waiter stands. It changes under its guard's lock,
// once, from waiting to another state.
type waitState int

const (
	waiting waitState = iota
	granted
	expired
	left // the waiter's context ended while it waited
)

// waiter is a caller in a guard's queue.
type waiter struct {
	prev, next *waiter
	// ready is closed when the state leaves waiting.
	ready chan struct{}
	state waitState
	n     int       // places asked for
	start time.Time // when granted
	shed  *Shed     // when expired
}

// grant hands w a place at now.
func (w *waiter) grant(now time.Time) {
	w.state, w.start = granted, now
	close(w.ready)
}

// outcome is what Acquire returns to w, once granted or expired.
func (w *waiter) outcome(g *Guard) (Slot, error) {
	if w.state == granted {
		return Slot{g: g, start: w.start, n: w.n}, nil
	}
	return Slot{}, w.shed
}

// queue is a guard's waiters in arrival order, as a doubly linked list so
// that a waiter who gives up leaves from anywhere in it at once.
type queue struct {
	head, tail *waiter
	len        int
}

func (q *queue) push(w *waiter) {
	w.prev = q.tail
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.len++
}

func (q *queue) pop() *waiter {
	w := q.head
	q.remove(w)
	return w
}

func (q *queue) remove(w *waiter) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	q.len--
}
