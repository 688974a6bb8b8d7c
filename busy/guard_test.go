package busy_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/busy"
)

func TestGuardAdmitsUpToMaxAtOnce(t *testing.T) {
	g := busy.NewGuard(limits(3, 0))

	slots := hold(t, g, 3)
	assert.Equal(t, busy.Stats{Active: 3, Max: 3}, g.Stats())
	_, err := g.Acquire(context.Background())
	assert.Equal(t, busy.QueueFull, shedOf(t, err).Reason)

	slots[1].Release()
	slot, err := g.Acquire(context.Background())
	assert.NoError(t, err, "a released place can be taken again")
	slot.Release()
	slots[0].Release()
	slots[2].Release()
	assert.Equal(t, 0, g.Stats().Active)
}

func TestQueuedWaitersAreAdmittedInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 5))
		holder := hold(t, g, 1)[0]
		var waiters []<-chan result
		for range 4 {
			waiters = append(waiters, enqueueOn(t, g, t.Context()))
		}

		for i, w := range waiters {
			holder.Release()
			holder = admitted(t, w)
			assert.Equal(t, busy.Stats{Active: 1, Queued: len(waiters) - i - 1, Max: 1, Queue: 5}, g.Stats())
			for _, later := range waiters[i+1:] {
				assert.True(t, still(later), "waiter %d was admitted out of turn", i)
			}
		}
		holder.Release()
		assert.Equal(t, 0, g.Stats().Active)
	})
}

func TestReleaseHandsThePlaceToTheHeadWaiterNotANewcomer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 1))
		holder := hold(t, g, 1)[0]
		waiter := enqueueOn(t, g, t.Context())

		holder.Release()
		// A newcomer whose context has ended takes only a place that is
		// free at once; it must find none, whether or not the waiter has
		// woken.
		_, err := g.Acquire(ctxDone())
		assert.ErrorIs(t, err, context.Canceled)

		slot := admitted(t, waiter)
		slot.Release()
		assert.Equal(t, busy.Stats{Max: 1, Queue: 1}, g.Stats())
	})
}

func TestWaiterWhoseContextEndsLeavesTheQueueAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 2))
		holder := hold(t, g, 1)[0]
		ctx, cancel := context.WithCancel(t.Context())
		leaving := enqueueOn(t, g, ctx)
		staying := enqueueOn(t, g, t.Context())

		cancel()
		assert.ErrorIs(t, receive(t, leaving).err, context.Canceled)
		assert.Equal(t, 1, g.Stats().Queued, "only the waiter who stayed should be queued")

		holder.Release()
		slot := admitted(t, staying)
		assert.Equal(t, busy.Stats{Active: 1, Max: 1, Queue: 2}, g.Stats())
		slot.Release()
		assert.Equal(t, 0, g.Stats().Active)
	})
}

func TestCallerWhoseContextHasEndedIsNotQueued(t *testing.T) {
	g := busy.NewGuard(limits(1, 1))
	holder := hold(t, g, 1)[0]
	ctx := ctxDone()

	_, err := g.Acquire(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 0, g.Stats().Queued)

	holder.Release()
	slot, err := g.Acquire(ctx)
	assert.NoError(t, err, "a free place is taken without waiting, so the ended context does not matter")
	slot.Release()
}

func TestWaitBeyondQueueTimeoutIsShed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 2))
		holder := hold(t, g, 1)[0]
		first := enqueueOn(t, g, t.Context())
		time.Sleep(time.Second)
		second := enqueueOn(t, g, t.Context())

		time.Sleep(timeout - time.Second - time.Nanosecond)
		assert.True(t, still(first), "a wait of just under QueueTimeout goes on")
		time.Sleep(time.Nanosecond)
		err := receive(t, first).err
		assert.Equal(t, &busy.Shed{Reason: busy.WaitExceeded, Active: 1, Queued: 1, RetryAfter: timeout}, shedOf(t, err))
		assert.True(t, still(second))

		holder.Release()
		slot := admitted(t, second)
		time.Sleep(timeout)
		assert.Equal(t, 1, g.Stats().Active, "the timeout of an admitted waiter does not shed it")
		slot.Release()
		assert.Equal(t, busy.Stats{Max: 1, Queue: 2, RecentService: timeout}, g.Stats(),
			"the waiter's service started when the place was handed over")
	})
}

// TestQueueTimeoutRunsOnRealTime checks, outside a bubble, that a waiter's
// timeout is a timer of the real clock: the wait ends after QueueTimeout.
func TestQueueTimeoutRunsOnRealTime(t *testing.T) {
	const short = 20 * time.Millisecond
	g := busy.NewGuard(busy.Limits{Max: 1, Queue: 1, QueueTimeout: short})
	holder := hold(t, g, 1)[0]
	begun := time.Now()
	_, err := g.Acquire(context.Background())
	assert.GreaterOrEqual(t, time.Since(begun), short)
	assert.Equal(t, busy.WaitExceeded, shedOf(t, err).Reason)
	holder.Release()
	assert.Equal(t, 0, g.Stats().Active)
}

func TestFullQueueIsShedWithActiveAndQueuedCounts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		max, queue int
	}{
		{"no queue", 1, 0},
		{"queue of one", 2, 1},
		{"queue of three", 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := busy.NewGuard(limits(tc.max, tc.queue))
				holders := hold(t, g, tc.max)
				var waiters []<-chan result
				for range tc.queue {
					waiters = append(waiters, enqueueOn(t, g, t.Context()))
				}

				_, err := g.Acquire(context.Background())
				want := &busy.Shed{Reason: busy.QueueFull, Active: tc.max, Queued: tc.queue, RetryAfter: timeout}
				assert.Equal(t, want, shedOf(t, err))
				assert.Equal(t, tc.queue, g.Stats().Queued, "a shed caller is not queued")

				drain(t, holders, waiters)
				assert.Equal(t, 0, g.Stats().Active)
			})
		})
	}
}

// drain releases holders, then each waiter once admitted.
func drain(t *testing.T, holders []busy.Slot, waiters []<-chan result) {
	t.Helper()
	for i := range holders {
		holders[i].Release()
	}
	for _, w := range waiters {
		slot := admitted(t, w)
		slot.Release()
	}
}

func TestRecentServiceIsAMovingAverageOfServiceTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 0))
		for _, tc := range []struct {
			service, want time.Duration
		}{
			{4 * time.Second, 4 * time.Second},  // the first is the average
			{12 * time.Second, 5 * time.Second}, // each counts for one eighth
			{0, 4375 * time.Millisecond},
		} {
			slot := hold(t, g, 1)[0]
			time.Sleep(tc.service)
			slot.Release()
			assert.Equal(t, tc.want, g.Stats().RecentService, "after a service of %v", tc.service)
		}
	})
}

func TestRetryAfterFollowsRecentServiceTimes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		service        time.Duration // 0: none released yet
		max, queued    int
		wantRetryAfter time.Duration
	}{
		{"no service time yet: the queue timeout", 0, 1, 0, timeout},
		{"one place, no one queued", 4 * time.Second, 1, 0, 4 * time.Second},
		{"two places share the wait", 4 * time.Second, 2, 0, 2 * time.Second},
		{"two queued ahead", 4 * time.Second, 1, 2, 12 * time.Second},
		{"three queued ahead of four places", 4 * time.Second, 4, 3, 4 * time.Second},
		{"at least a second", 100 * time.Millisecond, 2, 0, time.Second},
		{"saturates rather than overflows", math.MaxInt64/2 + 1, 1, 1, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := busy.NewGuard(limits(tc.max, tc.queued))
				if tc.service > 0 {
					slot := hold(t, g, 1)[0]
					time.Sleep(tc.service)
					slot.Release()
				}
				holders := hold(t, g, tc.max)
				var waiters []<-chan result
				for range tc.queued {
					waiters = append(waiters, enqueueOn(t, g, t.Context()))
				}

				_, err := g.Acquire(context.Background())
				assert.Equal(t, tc.wantRetryAfter, shedOf(t, err).RetryAfter)
				drain(t, holders, waiters)
			})
		})
	}
}

func TestRaisingMaxAdmitsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 3))
		holders := hold(t, g, 1)
		var waiters []<-chan result
		for range 3 {
			waiters = append(waiters, enqueueOn(t, g, t.Context()))
		}

		g.SetLimits(limits(3, 3))
		holders = append(holders, admitted(t, waiters[0]), admitted(t, waiters[1]))
		assert.True(t, still(waiters[2]), "the third waiter should wait for a place")
		assert.Equal(t, busy.Stats{Active: 3, Queued: 1, Max: 3, Queue: 3}, g.Stats())
		drain(t, holders, waiters[2:])
	})
}

func TestLoweringMaxLetsHoldersFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(3, 1))
		holders := hold(t, g, 3)

		g.SetLimits(limits(1, 1))
		assert.Equal(t, busy.Stats{Active: 3, Max: 1, Queue: 1}, g.Stats(), "holders keep their places")
		waiter := enqueueOn(t, g, t.Context())
		holders[0].Release()
		holders[1].Release()
		assert.True(t, still(waiter), "no one is admitted while the holders are at or above Max")
		assert.Equal(t, 1, g.Stats().Active)

		holders[2].Release()
		slot := admitted(t, waiter)
		assert.Equal(t, busy.Stats{Active: 1, Max: 1, Queue: 1}, g.Stats())
		slot.Release()
	})
}

func TestReleaseTwiceIsHarmless(t *testing.T) {
	g := busy.NewGuard(limits(1, 0))
	slot := hold(t, g, 1)[0]
	slot.Release()
	slot.Release()
	var zero busy.Slot
	zero.Release()
	assert.Equal(t, 0, g.Stats().Active)

	held := hold(t, g, 1)
	_, err := g.Acquire(context.Background())
	assert.Equal(t, busy.QueueFull, shedOf(t, err).Reason, "a second Release must not have freed a second place")
	held[0].Release()
}

// TestPlaceHandedToAWaiterWhoGaveUpPassesOn races a Release, which hands the
// place to the head waiter, against that waiter's context ending. Whichever
// wins, exactly one of the two waiters ends up holding the place. The bubble
// fakes time only: its goroutines still run in parallel, so the race is real.
func TestPlaceHandedToAWaiterWhoGaveUpPassesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 2))
		for range 200 {
			holder := hold(t, g, 1)[0]
			ctx, cancel := context.WithCancel(t.Context())
			quitting := enqueueOn(t, g, ctx)
			next := enqueueOn(t, g, t.Context())

			cancel()
			holder.Release()
			if r := receive(t, quitting); r.err == nil {
				assert.Equal(t, busy.Stats{Active: 1, Queued: 1, Max: 1, Queue: 2}, g.Stats())
				r.slot.Release()
			} else {
				require.ErrorIs(t, r.err, context.Canceled)
			}
			slot := admitted(t, next)
			assert.Equal(t, busy.Stats{Active: 1, Max: 1, Queue: 2}, g.Stats())
			slot.Release()
			require.Equal(t, 0, g.Stats().Active)
		}
	})
}

func TestUncontendedAcquireReleaseDoesNotAllocate(t *testing.T) {
	g := busy.NewGuard(limits(1, 0))
	s := busy.NewSet(limits(1, 0))
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		slot, _ := g.Acquire(ctx)
		slot.Release()
		slot, _ = s.Acquire(ctx, "tool")
		slot.Release()
	})
	assert.Zero(t, allocs)
}

func TestServiceTimeComesFromTheTimesTheCallerPasses(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := busy.NewGuard(limits(1, 0))
	slot, err := g.AcquireAt(context.Background(), start.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, start.Add(time.Second), slot.Start())
	slot.ReleaseAt(start.Add(3 * time.Second))
	assert.Equal(t, 2*time.Second, g.Stats().RecentService, "the first service time is taken as it is")
	slot.ReleaseAt(start.Add(time.Hour))
	assert.Equal(t, 2*time.Second, g.Stats().RecentService, "a second release does nothing")
}

// TestAcquireAndReleaseReadTimeNow checks the variants that are not passed
// a time: they read time.Now, which the bubble fakes.
func TestAcquireAndReleaseReadTimeNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(1, 0))
		slot := hold(t, g, 1)[0]
		assert.Equal(t, time.Now(), slot.Start())
		time.Sleep(3 * time.Second)
		slot.Release()
		assert.Equal(t, 3*time.Second, g.Stats().RecentService)

		s := busy.NewSet(limits(2, 0))
		first := holdKey(t, s, "k")
		assert.Equal(t, time.Now(), first.Start())
		second := holdKey(t, s, "k")
		time.Sleep(5 * time.Second)
		first.Release()
		assert.Equal(t, 5*time.Second, s.Stats()[0].RecentService)
		second.Release()
	})
}

func TestSeveralPlacesAreTakenAllOrNothing(t *testing.T) {
	g := busy.NewGuard(limits(3, 0))
	held := hold(t, g, 2)

	_, err := g.AcquireNAt(context.Background(), time.Now(), 2)
	assert.Equal(t, busy.QueueFull, shedOf(t, err).Reason, "two places asked, one free: none is taken")
	assert.Equal(t, 2, g.Stats().Active)

	held[0].Release()
	slot, err := g.AcquireNAt(context.Background(), time.Now(), 2)
	require.NoError(t, err)
	assert.Equal(t, 3, g.Stats().Active)
	slot.Release()
	assert.Equal(t, 1, g.Stats().Active, "a release gives back every place of the slot")
	held[1].Release()
	assert.Equal(t, 0, g.Stats().Active)
}

func TestWaiterAskingForSeveralPlacesIsNotOvertaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(2, 5))
		holders := hold(t, g, 2)
		queued := func() int { return g.Stats().Queued }
		many := enqueue(t, queued, func() (busy.Slot, error) { return g.AcquireNAt(t.Context(), time.Now(), 2) })
		one := enqueue(t, queued, func() (busy.Slot, error) { return g.Acquire(t.Context()) })

		// One place is released, but the head of the queue needs two: the
		// caller behind it, who needs one, waits its turn.
		holders[0].Release()
		assert.True(t, still(one), "a later caller asking for fewer places went first")
		assert.True(t, still(many))
		_, err := g.Acquire(ctxDone())
		assert.Error(t, err, "a newcomer does not take the free place either")
		assert.Equal(t, busy.Stats{Active: 1, Queued: 2, Max: 2, Queue: 5}, g.Stats())

		holders[1].Release()
		slot := admitted(t, many)
		assert.Equal(t, busy.Stats{Active: 2, Queued: 1, Max: 2, Queue: 5}, g.Stats())
		slot.Release()
		last := admitted(t, one)
		last.Release()
		assert.Equal(t, 0, g.Stats().Active)
	})
}

func TestAskingForMorePlacesThanMaxIsShedAtOnce(t *testing.T) {
	g := busy.NewGuard(limits(2, 5))
	_, err := g.AcquireNAt(context.Background(), time.Now(), 3)
	shed := shedOf(t, err)
	assert.Equal(t, busy.TooMany, shed.Reason)
	assert.Equal(t, "more places than max", shed.Reason.String())

	s := busy.NewSet(limits(2, 5))
	_, err = s.AcquireNAt(context.Background(), "k", time.Now(), 3)
	assert.Equal(t, busy.TooMany, shedOf(t, err).Reason)
	assert.Empty(t, s.Stats(), "the guard opened for the key is dropped again")
}

func TestLoweredMaxShedsWaitersAskingForMoreThanIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(limits(3, 5))
		holder := hold(t, g, 1)[0]
		queued := func() int { return g.Stats().Queued }
		three := enqueue(t, queued, func() (busy.Slot, error) { return g.AcquireNAt(t.Context(), time.Now(), 3) })
		one := enqueue(t, queued, func() (busy.Slot, error) { return g.Acquire(t.Context()) })

		g.SetLimits(limits(2, 5))
		r := receive(t, three)
		assert.Equal(t, busy.TooMany, shedOf(t, r.err).Reason, "three places can never be free under a Max of 2")
		last := admitted(t, one)
		last.Release()
		holder.Release()
		assert.Equal(t, busy.Stats{Max: 2, Queue: 5, RecentService: g.Stats().RecentService}, g.Stats())
	})
}

// ctxDone is a context that has ended.
func ctxDone() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
