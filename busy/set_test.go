package busy_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/busy"
)

// holdKey acquires a place for key in s, which must be free.
func holdKey(t *testing.T, s *busy.Set, key string) busy.Slot {
	t.Helper()
	slot, err := s.Acquire(context.Background(), key)
	require.NoError(t, err)
	return slot
}

// enqueueKey is enqueue for Acquire(t.Context(), key) on s.
func enqueueKey(t *testing.T, s *busy.Set, key string) <-chan result {
	t.Helper()
	return enqueue(t, func() int { return s.Totals().Queued },
		func() (busy.Slot, error) { return s.Acquire(t.Context(), key) })
}

func TestKeysHaveGuardsOfTheirOwn(t *testing.T) {
	s := busy.NewSet(limits(1, 0))
	a := holdKey(t, s, "a")

	_, err := s.Acquire(context.Background(), "a")
	assert.Equal(t, &busy.Shed{Reason: busy.QueueFull, Active: 1, RetryAfter: timeout}, shedOf(t, err))
	b := holdKey(t, s, "b")

	a.Release()
	b.Release()
}

func TestSetStatsListBusyKeysInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := busy.NewSet(limits(2, 1))
		held := []busy.Slot{holdKey(t, s, "search"), holdKey(t, s, "fetch"), holdKey(t, s, "fetch")}
		waiter := enqueueKey(t, s, "fetch")

		assert.Equal(t, []busy.KeyStats{
			{Key: "fetch", Stats: busy.Stats{Active: 2, Queued: 1, Max: 2, Queue: 1}},
			{Key: "search", Stats: busy.Stats{Active: 1, Max: 2, Queue: 1}},
		}, s.Stats())
		assert.Equal(t, busy.Stats{Active: 3, Queued: 1, Max: 2, Queue: 1}, s.Totals())

		drain(t, held, []<-chan result{waiter})
	})
}

func TestIdleKeyedGuardsAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := busy.NewSet(limits(1, 1))
		a := holdKey(t, s, "a")
		b := holdKey(t, s, "b")
		waiter := enqueueKey(t, s, "b")
		require.Len(t, s.Stats(), 2)

		a.Release()
		assert.Equal(t, []string{"b"}, keys(s.Stats()), "a has neither holders nor waiters")
		time.Sleep(timeout)
		assert.Equal(t, busy.WaitExceeded, shedOf(t, receive(t, waiter).err).Reason)
		assert.Equal(t, []string{"b"}, keys(s.Stats()), "b still has a holder")
		b.Release()
		assert.Empty(t, s.Stats())
		assert.Equal(t, busy.Stats{Max: 1, Queue: 1}, s.Totals())
	})
}

func keys(stats []busy.KeyStats) []string {
	var ks []string
	for _, s := range stats {
		ks = append(ks, s.Key)
	}
	return ks
}

func TestReturningKeyStartsAFreshGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := busy.NewSet(limits(1, 0))
		a := holdKey(t, s, "a")
		// A service time other than the queue timeout, so that a
		// RetryAfter drawn from it would show.
		time.Sleep(3 * time.Second)
		a.Release()
		assert.Empty(t, s.Stats())

		a = holdKey(t, s, "a")
		assert.Zero(t, s.Stats()[0].RecentService, "a dropped guard's service times go with it")
		_, err := s.Acquire(context.Background(), "a")
		assert.Equal(t, &busy.Shed{Reason: busy.QueueFull, Active: 1, RetryAfter: timeout}, shedOf(t, err),
			"a dropped guard's service times go with it")
		a.Release()
	})
}

func TestSetLimitsAppliesToEveryKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := busy.NewSet(limits(1, 1))
		held := []busy.Slot{holdKey(t, s, "a"), holdKey(t, s, "b")}
		waitA := enqueueKey(t, s, "a")
		waitB := enqueueKey(t, s, "b")

		s.SetLimits(limits(2, 0))
		held = append(held, admitted(t, waitA), admitted(t, waitB))
		assert.Equal(t, busy.Stats{Active: 4, Max: 2}, s.Totals())
		held = append(held, holdKey(t, s, "c"), holdKey(t, s, "c"))
		_, err := s.Acquire(context.Background(), "c")
		assert.Equal(t, busy.QueueFull, shedOf(t, err).Reason, "a new key's guard gets the new limits too")
		assert.Equal(t, busy.KeyStats{Key: "c", Stats: busy.Stats{Active: 2, Max: 2}}, s.Stats()[2])

		drain(t, held, nil)
		assert.Empty(t, s.Stats())
	})
}

func TestManyKeysComeAndGo(t *testing.T) {
	s := busy.NewSet(limits(1, 0))
	for _, prefix := range []string{"first", "second", "first"} {
		var held []busy.Slot
		var want []busy.KeyStats
		for i := range 100 {
			key := fmt.Sprintf("%s-%03d", prefix, i)
			held = append(held, holdKey(t, s, key))
			want = append(want, busy.KeyStats{Key: key, Stats: busy.Stats{Active: 1, Max: 1}})
		}
		assert.Equal(t, want, s.Stats())
		drain(t, held, nil)
		assert.Empty(t, s.Stats())
	}
}
