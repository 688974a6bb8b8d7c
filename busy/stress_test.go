package busy_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/busy/busytest"
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
	case errors.Is(err, context.Canceled):
		o.canceled.Add(1)
	case !errors.As(err, &shed):
		t.Errorf("Acquire returned %v, want a *Shed or context.Canceled", err)
	case shed.Reason == busy.QueueFull:
		o.full.Add(1)
	default:
		o.exceeded.Add(1)
	}
}

// assertAllHappened checks that the stress exercised every outcome.
func (o *outcomes) assertAllHappened(t *testing.T) {
	assert.Positive(t, o.admitted.Load(), "admitted")
	assert.Positive(t, o.full.Load(), "shed with a full queue")
	assert.Positive(t, o.exceeded.Load(), "shed after waiting too long")
	assert.Positive(t, o.canceled.Load(), "canceled")
}

// stress runs callers that acquire through acquire, each from 1 to maxN
// places at once, hold them briefly and release them, while their contexts
// are canceled at random and a driver advances clock, which makes waiters
// time out. held(key) counts the places held for key; every count must stay
// within Max.
func stress(t *testing.T, clock *busytest.Clock, keys []string, maxN int, acquire func(ctx context.Context, key string, n int) (busy.Slot, error)) *outcomes {
	const callers, rounds = 64, 300
	holders := make(map[string]*atomic.Int64)
	for _, k := range keys {
		holders[k] = new(atomic.Int64)
	}
	var o outcomes

	stop := make(chan struct{})
	driven := make(chan struct{})
	go func() {
		defer close(driven)
		rng := rand.New(rand.NewPCG(0, 0))
		for {
			select {
			case <-stop:
				return
			default:
				clock.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
				runtime.Gosched()
			}
		}
	}()

	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for range rounds {
				key := keys[rng.IntN(len(keys))]
				n := 1 + rng.IntN(maxN)
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(4) == 0 {
					go cancel()
				}
				slot, err := acquire(ctx, key, n)
				o.count(t, err)
				if err == nil {
					if held := holders[key].Add(int64(n)); held > int64(stressLimits.Max) {
						t.Errorf("%d places of key %q held at once, over Max %d", held, key, stressLimits.Max)
					}
					for range rng.IntN(4) {
						runtime.Gosched()
					}
					holders[key].Add(-int64(n))
					slot.Release()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	<-driven
	t.Logf("admitted %d, queue full %d, wait exceeded %d, canceled %d",
		o.admitted.Load(), o.full.Load(), o.exceeded.Load(), o.canceled.Load())
	return &o
}

func TestActiveNeverExceedsMaxUnderStress(t *testing.T) {
	clock := busytest.NewClock(start)
	g := busy.NewGuard(stressLimits, clock)

	o := stress(t, clock, []string{""}, 1, func(ctx context.Context, _ string, _ int) (busy.Slot, error) {
		slot, err := g.Acquire(ctx)
		if active := g.Stats().Active; active > stressLimits.Max {
			t.Errorf("%d active, over Max %d", active, stressLimits.Max)
		}
		return slot, err
	})

	o.assertAllHappened(t)
	assert.Equal(t, busy.Stats{Max: 4, Queue: 8, RecentService: g.Stats().RecentService}, g.Stats())
}

func TestKeyedActiveNeverExceedsMaxUnderStress(t *testing.T) {
	clock := busytest.NewClock(start)
	s := busy.NewSet(stressLimits, clock)

	o := stress(t, clock, []string{"a", "b", "c"}, 1, func(ctx context.Context, key string, _ int) (busy.Slot, error) {
		return s.Acquire(ctx, key)
	})

	o.assertAllHappened(t)
	assert.Empty(t, s.Stats(), "every guard should have been dropped once idle")
	assert.Equal(t, busy.Stats{Max: 4, Queue: 8}, s.Totals())
}

func TestPlacesNeverExceedMaxWhenCallersTakeSeveralUnderStress(t *testing.T) {
	clock := busytest.NewClock(start)
	s := busy.NewSet(stressLimits, clock)

	o := stress(t, clock, []string{"a", "b"}, stressLimits.Max, func(ctx context.Context, key string, n int) (busy.Slot, error) {
		slot, err := s.AcquireNAt(ctx, key, clock.Now(), n)
		if active := s.Totals().Active; active > 2*stressLimits.Max {
			t.Errorf("%d places held over two keys, over twice Max %d", active, stressLimits.Max)
		}
		return slot, err
	})

	o.assertAllHappened(t)
	assert.Empty(t, s.Stats(), "every guard should have been dropped once idle")
	assert.Equal(t, busy.Stats{Max: 4, Queue: 8}, s.Totals())
}
