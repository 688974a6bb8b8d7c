package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// limit returns a Limit of events per window with the given burst.
func limit(events int, window time.Duration, burst int) ratelimit.Limit {
	return ratelimit.Limit{Rate: ratelimit.Rate{Events: events, Window: window}, Burst: burst}
}

func TestNewKeyStartsFull(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	lim := limit(1, time.Hour, 3)

	for want := 2; want >= 0; want-- {
		d := m.Take(now, "a", 1, lim)
		assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: want}, d)
	}
	assert.False(t, m.Take(now, "a", 1, lim).Allowed)
}

func TestKeysHaveTheirOwnBuckets(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	lim := limit(1, time.Hour, 1)

	require.True(t, m.Take(now, "a", 1, lim).Allowed)
	assert.False(t, m.Take(now, "a", 1, lim).Allowed)
	assert.True(t, m.Take(now, "b", 1, lim).Allowed)
	assert.Equal(t, 2, m.Len())
}

func TestCostTakesThatManyTokens(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	lim := limit(1, time.Second, 10)

	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 3}, m.Take(now, "a", 7, lim))
	d := m.Take(now, "a", 4, lim)
	assert.False(t, d.Allowed, "4 tokens asked, 3 held")
	assert.Equal(t, 3, d.Remaining)
	assert.Equal(t, time.Second, d.RetryAfter)
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 0}, m.Take(now, "a", 3, lim))
}

func TestTokensRefillContinuously(t *testing.T) {
	m := ratelimit.NewMemory(0)
	base := time.Now()
	lim := limit(10, time.Second, 10)

	require.True(t, m.Take(base, "a", 10, lim).Allowed)
	assert.False(t, m.Take(base.Add(99*time.Millisecond), "a", 1, lim).Allowed)
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 0}, m.Take(base.Add(100*time.Millisecond), "a", 1, lim))
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2}, m.Take(base.Add(400*time.Millisecond), "a", 1, lim))
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 9}, m.Take(base.Add(time.Hour), "a", 1, lim),
		"a bucket refills up to its burst and no further")
}

func TestRetryAfterIsTimeUntilCostRefills(t *testing.T) {
	m := ratelimit.NewMemory(0)
	base := time.Now()
	lim := limit(1, time.Second, 5)

	require.True(t, m.Take(base, "a", 5, lim).Allowed)

	d := m.Take(base.Add(400*time.Millisecond), "a", 1, lim)
	assert.Equal(t, ratelimit.Decision{RetryAfter: 600 * time.Millisecond}, d)

	d = m.Take(base.Add(400*time.Millisecond), "a", 3, lim)
	assert.Equal(t, ratelimit.Decision{RetryAfter: 2600 * time.Millisecond}, d)

	assert.False(t, m.Take(base.Add(3*time.Second-time.Nanosecond), "a", 3, lim).Allowed)
	assert.True(t, m.Take(base.Add(3*time.Second), "a", 3, lim).Allowed)
}

// TestRetryAfterIsExact checks, over random rates, bursts, costs and times,
// that a denied event retried RetryAfter later is allowed, and retried one
// nanosecond sooner is not.
func TestRetryAfterIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := ratelimit.NewMemory(0)
	now := time.Now()
	denials := 0
	for i := range 100000 {
		key := fmt.Sprint(i % 50)
		lim := limit(1+rng.IntN(10000), time.Duration(1+rng.Int64N(int64(25*time.Hour))), 1+rng.IntN(100))
		cost := 1 + rng.IntN(lim.Burst)
		now = now.Add(time.Duration(rng.Int64N(int64(lim.Rate.Window)/int64(lim.Rate.Events) + 1)))
		d := m.Take(now, key, cost, lim)
		if d.Allowed {
			continue
		}
		denials++
		require.Positive(t, d.RetryAfter)
		early := m.Take(now.Add(d.RetryAfter-time.Nanosecond), key, cost, lim)
		require.False(t, early.Allowed, "%v: cost %d retried %v after, 1ns early", lim, cost, d.RetryAfter)
		now = now.Add(d.RetryAfter)
		require.True(t, m.Take(now, key, cost, lim).Allowed, "%v: cost %d retried %v after", lim, cost, d.RetryAfter)
	}
	assert.Greater(t, denials, 1000, "the test should exercise denials")
}

func TestCostAboveBurstNeverSucceeds(t *testing.T) {
	m := ratelimit.NewMemory(0)
	base := time.Now()
	lim := limit(2, time.Second, 4)

	d := m.Take(base, "a", 5, lim)
	assert.Equal(t, ratelimit.Decision{RetryAfter: 2 * time.Second, Remaining: 4}, d,
		"RetryAfter is the time to refill a bucket from empty")
	assert.False(t, m.Take(base.Add(24*time.Hour), "a", 5, lim).Allowed)
	assert.Zero(t, m.Len(), "a denied new key holds no bucket")
}

func TestZeroCostTakesNothing(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	lim := limit(1, time.Second, 2)

	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2}, m.Take(now, "a", 0, lim))
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2}, m.Take(now, "a", -3, lim))
	assert.Zero(t, m.Len())
}

func TestChangedRateAppliesToExistingBuckets(t *testing.T) {
	m := ratelimit.NewMemory(0)
	base := time.Now()
	slow := limit(1, time.Minute, 2)
	fast := limit(10, time.Second, 2)

	require.True(t, m.Take(base, "a", 2, slow).Allowed)
	require.Equal(t, time.Minute, m.Take(base, "a", 1, slow).RetryAfter)

	assert.Equal(t, 100*time.Millisecond, m.Take(base, "a", 1, fast).RetryAfter)
	assert.True(t, m.Take(base.Add(100*time.Millisecond), "a", 1, fast).Allowed)
}

func TestChangedBurstAppliesToExistingBuckets(t *testing.T) {
	m := ratelimit.NewMemory(0)
	base := time.Now()
	wide := limit(1, time.Second, 10)
	narrow := limit(1, time.Second, 3)

	require.True(t, m.Take(base, "a", 1, wide).Allowed)
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2}, m.Take(base, "a", 1, narrow),
		"9 tokens held, but the new burst caps them at 3")

	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 9}, m.Take(base.Add(time.Hour), "a", 1, wide),
		"a raised burst lets the bucket refill further")
}

func TestRefundGivesTokensBack(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	lim := limit(1, time.Hour, 5)

	require.True(t, m.Take(now, "a", 4, lim).Allowed)
	m.Refund(now, "a", 3, lim)
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 3}, m.Take(now, "a", 1, lim))

	m.Refund(now, "a", 100, lim)
	assert.Zero(t, m.Len(), "a refund never fills a bucket beyond its burst; a full bucket is dropped")
	m.Refund(now, "b", 1, lim)
	assert.Zero(t, m.Len(), "a refund to a key without a bucket changes nothing")
}

func TestRefilledBucketsAreDropped(t *testing.T) {
	m := ratelimit.NewMemory(0)
	base := time.Now()
	lim := limit(1, time.Second, 10)

	require.True(t, m.Take(base, "a", 10, lim).Allowed)
	require.True(t, m.Take(base, "b", 5, lim).Allowed)
	require.True(t, m.Take(base, "c", 1, lim).Allowed)
	require.Equal(t, 3, m.Len())

	assert.Zero(t, m.Sweep(base.Add(time.Second-time.Nanosecond)))
	assert.Equal(t, 1, m.Sweep(base.Add(time.Second)), "c has refilled its one token")
	assert.Equal(t, 1, m.Sweep(base.Add(5*time.Second)), "b has refilled its five")
	assert.Equal(t, 1, m.Len())
	assert.Equal(t, 1, m.Sweep(base.Add(10*time.Second)))
	assert.Zero(t, m.Len())

	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 9}, m.Take(base.Add(10*time.Second), "a", 1, lim),
		"a dropped bucket comes back full")
}

func TestOverflowBucketAtKeyCap(t *testing.T) {
	m := ratelimit.NewMemory(2)
	base := time.Now()
	lim := limit(1, time.Minute, 1)

	require.True(t, m.Take(base, "a", 1, lim).Allowed)
	require.True(t, m.Take(base, "b", 1, lim).Allowed)

	assert.True(t, m.Take(base, "c", 1, lim).Allowed, "c takes the overflow bucket's token")
	assert.Equal(t, ratelimit.Decision{RetryAfter: time.Minute}, m.Take(base, "d", 1, lim),
		"d shares the overflow bucket with c")
	assert.False(t, m.Take(base, "e", 1, lim).Allowed, "keys beyond the cap get the limit's rate in total")
	assert.False(t, m.Take(base, "a", 1, lim).Allowed, "a keeps its own bucket")
	assert.Equal(t, 3, m.Len(), "two buckets of their own and the overflow bucket")

	m.Refund(base, "c", 1, lim)
	assert.True(t, m.Take(base, "e", 1, lim).Allowed, "a refund for a key at the cap goes to the overflow bucket")

	later := base.Add(time.Minute)
	assert.Equal(t, 3, m.Sweep(later))
	assert.Zero(t, m.Len())
	require.True(t, m.Take(later, "d", 1, lim).Allowed)
	require.True(t, m.Take(later, "e", 1, lim).Allowed)
	assert.Equal(t, 2, m.Len(), "after a sweep, new keys get buckets of their own again")
}

func TestChangedMaxKeysAppliesToLiveBuckets(t *testing.T) {
	m := ratelimit.NewMemory(1)
	base := time.Now()
	lim := limit(1, time.Minute, 1)
	require.True(t, m.Take(base, "a", 1, lim).Allowed)
	require.True(t, m.Take(base, "b", 1, lim).Allowed, "b takes the overflow bucket")
	assert.True(t, m.Overflowing())
	assert.Equal(t, 1, m.MaxKeys())

	m.SetMaxKeys(3)
	assert.Equal(t, 3, m.MaxKeys())
	assert.True(t, m.Take(base, "c", 1, lim).Allowed, "a raised cap gives new keys buckets of their own")
	assert.True(t, m.Take(base, "d", 1, lim).Allowed)
	assert.False(t, m.Take(base, "e", 1, lim).Allowed, "at the new cap, e shares the overflow bucket, still empty")

	m.SetMaxKeys(1)
	assert.False(t, m.Take(base, "f", 1, lim).Allowed, "a lowered cap keeps the buckets held and sends new keys to the overflow bucket")
	assert.False(t, m.Take(base, "c", 1, lim).Allowed, "c keeps its bucket")
	m.SetMaxKeys(0)
	assert.Equal(t, ratelimit.DefaultMaxKeys, m.MaxKeys())

	m.Sweep(base.Add(time.Minute))
	assert.False(t, m.Overflowing(), "the overflow bucket refilled")
}

func TestClockGoingBackwards(t *testing.T) {
	m := ratelimit.NewMemory(0)
	base := time.Now()
	lim := limit(1, time.Second, 2)

	require.True(t, m.Take(base.Add(10*time.Second), "a", 1, lim).Allowed)

	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 0}, m.Take(base.Add(5*time.Second), "a", 1, lim),
		"an earlier time neither adds nor removes tokens")
	assert.Equal(t, ratelimit.Decision{RetryAfter: 6 * time.Second}, m.Take(base.Add(5*time.Second), "a", 1, lim),
		"refill resumes from the latest time seen")
	assert.False(t, m.Take(base.Add(10500*time.Millisecond), "a", 1, lim).Allowed,
		"going back did not move the bucket's clock back")
	assert.True(t, m.Take(base.Add(11*time.Second), "a", 1, lim).Allowed)
}

func TestConcurrentTakesNeverExceedTheBurst(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	lim := limit(1, time.Hour, 100)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if m.Take(now, "a", 1, lim).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(100), allowed.Load())
}

func TestConcurrentUseKeepsTheCap(t *testing.T) {
	const maxKeys = 100
	m := ratelimit.NewMemory(maxKeys)
	base := time.Now()
	lim := limit(1, time.Millisecond, 2)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				now := base.Add(time.Duration(i) * time.Microsecond)
				reqs := []ratelimit.Request{
					{Store: m, Key: fmt.Sprintf("%d.%d", g, i%200), Cost: 1, Limit: lim},
					{Store: m, Key: "shared", Cost: 1, Limit: lim},
				}
				ratelimit.TakeAll(now, reqs)
				if i%50 == 0 {
					m.Sweep(now)
				}
				assert.LessOrEqual(t, m.Len(), maxKeys+1)
			}
		})
	}
	wg.Wait()
	m.Sweep(base.Add(time.Second))
	assert.Zero(t, m.Len())
}

func TestRunSweepsWithItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ratelimit.NewMemory(0)
		base := time.Now()
		require.True(t, m.Take(base, "a", 1, limit(1, time.Hour, 1)).Allowed)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx, time.Minute, func() time.Time { return base.Add(time.Hour) }, nil)
		synctest.Wait()
		assert.Equal(t, 1, m.Len(), "no sweep before the first tick")
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Zero(t, m.Len(), "swept at the first tick, with Run's clock")
	})
}

func TestRunGoesOnAfterASweepPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ratelimit.NewMemory(0)
		base := time.Now()
		require.True(t, m.Take(base, "a", 1, limit(1, time.Hour, 1)).Allowed)
		var ticks atomic.Int32
		clock := func() time.Time {
			if ticks.Add(1) == 1 {
				panic("the clock panics")
			}
			return base.Add(time.Hour)
		}
		var recovered []any
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx, time.Minute, clock, func(v any) { recovered = append(recovered, v) })
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, []any{"the clock panics"}, recovered, "the panic given to recovered")
		assert.Equal(t, 1, m.Len())
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Zero(t, m.Len(), "the next sweep ran")
	})
}

func TestRunStopsWhenContextDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ratelimit.NewMemory(0)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			m.Run(ctx, time.Millisecond, nil, nil)
			close(done)
		}()
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return after its context was done")
		}
	})
}
