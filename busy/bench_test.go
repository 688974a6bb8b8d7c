// The benchmarks are not part of the test suite's pass or fail. Run them with
//
//	go test -run XXX -bench . -benchmem ./busy/
//
// They measure the uncontended path, where a place is free: the cost that
// every request pays when the server is not busy. Part of it is the two
// readings of time.Now, one at Acquire and one at Release, which time the
// service; BenchmarkGuardAcquireReleaseAt, which is passed its times, shows
// the rest.

package busy_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/busy"
)

// roomy limits admit every caller of a benchmark at once.
var roomy = busy.Limits{Max: 1 << 20, QueueTimeout: timeout}

func BenchmarkGuardAcquireRelease(b *testing.B) {
	g := busy.NewGuard(limits(1, 0))
	ctx := context.Background()
	for b.Loop() {
		slot, err := g.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		slot.Release()
	}
}

// BenchmarkGuardAcquireReleaseAt is the path the mcp handler takes: it has
// read the clock already, at the request's start and end, and passes the
// times in, as x/time/rate's AllowN(t, n) does.
func BenchmarkGuardAcquireReleaseAt(b *testing.B) {
	g := busy.NewGuard(limits(1, 0))
	ctx := context.Background()
	now := time.Now()
	for b.Loop() {
		slot, err := g.AcquireAt(ctx, now)
		if err != nil {
			b.Fatal(err)
		}
		slot.ReleaseAt(now)
	}
}

func BenchmarkGuardAcquireReleaseParallel(b *testing.B) {
	g := busy.NewGuard(roomy)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			slot, err := g.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			slot.Release()
		}
	})
}

// BenchmarkSetAcquireRelease takes and gives back a key's only place, so the
// key's guard is made and dropped every time.
func BenchmarkSetAcquireRelease(b *testing.B) {
	s := busy.NewSet(limits(1, 0))
	ctx := context.Background()
	for b.Loop() {
		slot, err := s.Acquire(ctx, "search_invoices")
		if err != nil {
			b.Fatal(err)
		}
		slot.Release()
	}
}

// BenchmarkSetAcquireReleaseParallel gives each goroutine a key of its own.
func BenchmarkSetAcquireReleaseParallel(b *testing.B) {
	s := busy.NewSet(limits(1, 0))
	ctx := context.Background()
	var tools atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("tool_%d", tools.Add(1))
		for pb.Next() {
			slot, err := s.Acquire(ctx, key)
			if err != nil {
				b.Error(err)
				return
			}
			slot.Release()
		}
	})
}

// BenchmarkSetAcquireReleaseParallelOneKey has every goroutine share one
// busy key, so its guard stays live.
func BenchmarkSetAcquireReleaseParallelOneKey(b *testing.B) {
	s := busy.NewSet(roomy)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			slot, err := s.Acquire(ctx, "search_invoices")
			if err != nil {
				b.Error(err)
				return
			}
			slot.Release()
		}
	})
}
