package busy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/busy/busytest"
)

var _ busy.Clock = (*busytest.Clock)(nil)

// start is the fake clocks' time zero.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

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
// queued, as queued (a count of waiters) shows.
func enqueue(t *testing.T, queued func() int, acquire func() (busy.Slot, error)) <-chan result {
	t.Helper()
	before := queued()
	done := make(chan result, 1)
	go func() {
		slot, err := acquire()
		done <- result{slot, err}
	}()
	require.Eventually(t, func() bool { return queued() == before+1 }, 2*time.Second, 50*time.Microsecond,
		"the caller should be queued")
	return done
}

// enqueueOn is enqueue for Acquire(ctx) on g.
func enqueueOn(t *testing.T, g *busy.Guard, ctx context.Context) <-chan result {
	t.Helper()
	return enqueue(t, func() int { return g.Stats().Queued }, func() (busy.Slot, error) { return g.Acquire(ctx) })
}

// receive returns the result of an enqueued Acquire; it fails the test if
// none comes, which means a waiter was wrongly left waiting.
func receive(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
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

// still reports whether an enqueued Acquire has yet to return.
func still(done <-chan result) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
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
