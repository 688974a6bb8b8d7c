package busy_test

// The stress tests run in a synctest bubble. Its goroutines still run in
// parallel on real threads, so the race detector and the checks of Max see
// real interleavings of Acquire, Release, cancellation and timeout; only
// time is fake. That keeps them deterministic and fast: callers hold places,
// back off and cancel for spans of fake time, so waiters surely time out
// whatever the speed of the machine, events fall due at the same fake
// instant (a Release, a cancellation and a timeout racing for one waiter),
// and no span costs real time. Outside a bubble, a QueueTimeout short enough
// for a quick test would make the outcomes depend on the scheduler's delays.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/busy"
)

// stressLimits are tight enough that callers queue, time out and are shed.
var stressLimits = busy.Limits{Max: 4, Queue: 8, QueueTimeout: 50 * time.Millisecond}

// outcomes counts how stressed Acquires ended.
type outcomes struct {
	admitted, full, exceeded, canceled atomic.Int64
}

func (o *outcomes) count(t *testing.T, err error) {
	var shed *busy.Shed
	switch {
	case err == nil:
		o.admitted.Add(1)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		o.canceled.Add(1)
	case !errors.As(err, &shed):
		t.Errorf("Acquire returned %v, want a *Shed or the context's error", err)
	case shed.Reason == busy.QueueFull:
		o.full.Add(1)
	case shed.Reason == busy.WaitExceeded:
		o.exceeded.Add(1)
	default:
		t.Errorf("Acquire returned %v, want a full queue or a wait exceeded", err)
	}
}

// assertAllHappened checks that the stress exercised every outcome.
func (o *outcomes) assertAllHappened(t *testing.T) {
	assert.Positive(t, o.admitted.Load(), "admitted")
	assert.Positive(t, o.full.Load(), "shed with a full queue")
	assert.Positive(t, o.exceeded.Load(), "shed after waiting too long")
	assert.Positive(t, o.canceled.Load(), "canceled")
}

// ms is n milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// stress runs callers that acquire through acquire, each from 1 to maxN
// places at once, hold them for a few fake milliseconds and release them,
// or back off as briefly when shed, while their contexts end at random: at
// once, racing the Acquire; after a while, mostly while they wait; at the
// very instant their wait times out; or just before a holder of the same key
// releases, so that the places may be handed to a waiter who is giving up.
// Waiters time out as fake time passes. holders[key] counts the places held
// for key; every count must stay within Max. It must be called in a bubble.
func stress(t *testing.T, keys []string, maxN int, acquire func(ctx context.Context, key string, n int) (busy.Slot, error)) *outcomes {
	const callers, rounds = 64, 300
	holders := make(map[string]*atomic.Int64)
	// latest[key] cancels the context of the latest caller for key.
	latest := make(map[string]*atomic.Pointer[context.CancelFunc])
	for _, k := range keys {
		holders[k] = new(atomic.Int64)
		latest[k] = new(atomic.Pointer[context.CancelFunc])
	}
	var o outcomes
	begun := time.Now()

	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for range rounds {
				key := keys[rng.IntN(len(keys))]
				n := 1 + rng.IntN(maxN)
				var ctx context.Context
				var cancel context.CancelFunc
				var timer *time.Timer
				switch rng.IntN(8) {
				case 0: // at once, racing the Acquire
					ctx, cancel = context.WithCancel(context.Background())
					go cancel()
				case 1, 2: // after a while, mostly while the caller waits
					ctx, cancel = context.WithCancel(context.Background())
					timer = time.AfterFunc(ms(rng.IntN(60)), cancel)
				case 3: // at the instant the wait times out
					ctx, cancel = context.WithTimeout(context.Background(), stressLimits.QueueTimeout)
				default: // perhaps by a holder of key, just before it releases
					ctx, cancel = context.WithCancel(context.Background())
				}
				latest[key].Store(&cancel)
				slot, err := acquire(ctx, key, n)
				o.count(t, err)
				if err == nil {
					if held := holders[key].Add(int64(n)); held > int64(stressLimits.Max) {
						t.Errorf("%d places of key %q held at once, over Max %d", held, key, stressLimits.Max)
					}
					time.Sleep(ms(rng.IntN(50)))
					holders[key].Add(-int64(n))
					if rng.IntN(4) == 0 {
						(*latest[key].Load())()
					}
					slot.Release()
				} else {
					time.Sleep(ms(rng.IntN(20)))
				}
				if timer != nil {
					timer.Stop()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("in %v of fake time: admitted %d, queue full %d, wait exceeded %d, canceled %d", time.Since(begun),
		o.admitted.Load(), o.full.Load(), o.exceeded.Load(), o.canceled.Load())
	return &o
}

func TestActiveNeverExceedsMaxUnderStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := busy.NewGuard(stressLimits)

		o := stress(t, []string{""}, 1, func(ctx context.Context, _ string, _ int) (busy.Slot, error) {
			slot, err := g.Acquire(ctx)
			if active := g.Stats().Active; active > stressLimits.Max {
				t.Errorf("%d active, over Max %d", active, stressLimits.Max)
			}
			return slot, err
		})

		o.assertAllHappened(t)
		assert.Equal(t, busy.Stats{Max: 4, Queue: 8, RecentService: g.Stats().RecentService}, g.Stats())
	})
}

func TestKeyedActiveNeverExceedsMaxUnderStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := busy.NewSet(stressLimits)

		o := stress(t, []string{"a", "b", "c"}, 1, func(ctx context.Context, key string, _ int) (busy.Slot, error) {
			return s.Acquire(ctx, key)
		})

		o.assertAllHappened(t)
		assert.Empty(t, s.Stats(), "every guard should have been dropped once idle")
		assert.Equal(t, busy.Stats{Max: 4, Queue: 8}, s.Totals())
	})
}

func TestPlacesNeverExceedMaxWhenCallersTakeSeveralUnderStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := busy.NewSet(stressLimits)

		o := stress(t, []string{"a", "b"}, stressLimits.Max, func(ctx context.Context, key string, n int) (busy.Slot, error) {
			slot, err := s.AcquireNAt(ctx, key, time.Now(), n)
			if active := s.Totals().Active; active > 2*stressLimits.Max {
				t.Errorf("%d places held over two keys, over twice Max %d", active, stressLimits.Max)
			}
			return slot, err
		})

		o.assertAllHappened(t)
		assert.Empty(t, s.Stats(), "every guard should have been dropped once idle")
		assert.Equal(t, busy.Stats{Max: 4, Queue: 8}, s.Totals())
	})
}
