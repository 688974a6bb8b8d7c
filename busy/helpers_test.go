package busy_test

// Tests that queue callers or let time pass run in a testing/synctest bubble
// (synctest.Test): there time.Now, time.Sleep and the guard's timers run on
// the bubble's fake clock, which moves only when every goroutine of the
// bubble is blocked. A caller is known to be queued once synctest.Wait has
// returned, and a test makes a waiter time out by sleeping past
// QueueTimeout, which returns at once in real time.

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/busy"
)

const timeout = 10 * time.Second

// limits returns Limits of max holders and queue waiters, with a queue
// timeout of ten seconds.
func limits(max, queue int) busy.Limits {
	return busy.Limits{Max: max, Queue: queue, QueueTimeout: timeout}
}

// result is what an Acquire returned.
type result struct {
	slot busy.Slot
	err  error
}

// enqueue starts acquire in a goroutine and returns once the caller is
// queued: after synctest.Wait, the goroutine is blocked until another
// goroutine of the bubble wakes it, so it is in the queue, which queued (a
// count of waiters) must show, or it has returned, which fails the test. It
// must be called in a bubble. Callers acquire with t.Context(), or a context
// derived from it, so that a test that fails while they wait ends them
// rather than leaving them blocked for synctest to report as a deadlock.
func enqueue(t *testing.T, queued func() int, acquire func() (busy.Slot, error)) <-chan result {
	t.Helper()
	before := queued()
	done := make(chan result, 1)
	go func() {
		slot, err := acquire()
		done <- result{slot, err}
	}()
	synctest.Wait()
	require.Empty(t, done, "the caller should be queued, not done")
	require.Equal(t, before+1, queued(), "the caller should be queued")
	return done
}

// enqueueOn is enqueue for Acquire(ctx) on g.
func enqueueOn(t *testing.T, g *busy.Guard, ctx context.Context) <-chan result {
	t.Helper()
	return enqueue(t, func() int { return g.Stats().Queued }, func() (busy.Slot, error) { return g.Acquire(ctx) })
}

// receive returns the result of an enqueued Acquire once every goroutine of
// the bubble is blocked; it fails the test if there is none then, which
// means a waiter was wrongly left waiting. Time does not pass in
// synctest.Wait, so a result it finds did not wait for a timer. It must be
// called in a bubble.
func receive(t *testing.T, done <-chan result) result {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-done:
		return r
	default:
		t.Fatal("the queued Acquire did not return")
		return result{}
	}
}

// admitted returns the Slot of an enqueued Acquire that must succeed.
func admitted(t *testing.T, done <-chan result) busy.Slot {
	t.Helper()
	r := receive(t, done)
	require.NoError(t, r.err)
	return r.slot
}

// still reports whether an enqueued Acquire has yet to return, once every
// goroutine of the bubble is blocked: it will not return unless something
// else happens. It must be called in a bubble.
func still(done <-chan result) bool {
	synctest.Wait()
	return len(done) == 0
}

// hold acquires n places on g, which must be free.
func hold(t *testing.T, g *busy.Guard, n int) []busy.Slot {
	t.Helper()
	slots := make([]busy.Slot, n)
	for i := range slots {
		var err error
		slots[i], err = g.Acquire(context.Background())
		require.NoError(t, err)
	}
	return slots
}

// shedOf returns err as a *Shed, failing the test when it is not one.
func shedOf(t *testing.T, err error) *busy.Shed {
	t.Helper()
	var shed *busy.Shed
	require.ErrorAs(t, err, &shed)
	return shed
}
