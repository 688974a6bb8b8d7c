// The benchmarks are not part of the test suite's pass or fail. Run them with
//
//	go test -run XXX -bench . -benchmem ./ratelimit/
//
// BenchmarkMemoryPerBucket fills a store with a million keys and reports the
// heap each bucket takes (B/bucket) and what remains once they are swept
// (B/swept).

package ratelimit_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// roomy is a limit that allows every event of a benchmark on one key.
var roomy = limit(1, time.Second, 1<<40)

func BenchmarkBucketAllow(b *testing.B) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	m.Take(now, "10.0.0.1", 1, roomy)
	for b.Loop() {
		if !m.Take(now, "10.0.0.1", 1, roomy).Allowed {
			b.Fatal("denied")
		}
	}
}

func BenchmarkBucketAllowParallel(b *testing.B) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	var clients atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("10.0.0.%d", clients.Add(1))
		for pb.Next() {
			if !m.Take(now, key, 1, roomy).Allowed {
				b.Error("denied")
				return
			}
		}
	})
}

func BenchmarkTakeAllTwoLimits(b *testing.B) {
	perClient, global := ratelimit.NewMemory(0), ratelimit.NewMemory(0)
	now := time.Now()
	reqs := []ratelimit.Request{
		{Store: perClient, Key: "10.0.0.1", Cost: 1, Limit: roomy},
		{Store: global, Key: "", Cost: 1, Limit: roomy},
	}
	for b.Loop() {
		if denied, _ := ratelimit.TakeAll(now, reqs); denied >= 0 {
			b.Fatal("denied")
		}
	}
}

// BenchmarkMemoryPerBucket measures the heap held by a million buckets, and
// checks that sweeping them once they have refilled gives it all back.
func BenchmarkMemoryPerBucket(b *testing.B) {
	memoryPerBucket(b, 1_000_000, 200, func(i int) string { return fmt.Sprintf("10.0.%d.%d", i/1000, i%1000) })
}

// BenchmarkMemoryPerBucketLongestKey is BenchmarkMemoryPerBucket with keys
// of 128 bytes, the longest the mcp handler keeps (a longer value is kept as
// its 71-byte digest): the worst case per bucket.
func BenchmarkMemoryPerBucketLongestKey(b *testing.B) {
	memoryPerBucket(b, 200_000, 400, func(i int) string { return fmt.Sprintf("%0128d", i) })
}

func memoryPerBucket(b *testing.B, n int, most float64, keyOf func(int) string) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = keyOf(i)
	}
	lim := limit(10, time.Second, 10)
	var perBucket, swept float64
	for b.Loop() {
		base := time.Now()
		before := heapAlloc()
		m := ratelimit.NewMemory(n)
		for _, k := range keys {
			m.Take(base, k, 1, lim)
		}
		full := heapAlloc()
		if m.Len() != n {
			b.Fatalf("Len() = %d after %d keys, want %d", m.Len(), n, n)
		}
		m.Sweep(base.Add(lim.Rate.Window))
		after := heapAlloc()
		if m.Len() != 0 {
			b.Fatalf("Len() = %d after sweeping refilled buckets, want 0", m.Len())
		}
		runtime.KeepAlive(m)
		perBucket = float64(full-before) / float64(n)
		swept = float64(after-before) / float64(n)
	}
	b.ReportMetric(perBucket, "B/bucket")
	b.ReportMetric(swept, "B/swept")
	if perBucket > most {
		b.Errorf("a bucket takes %.0f bytes, want at most %.0f", perBucket, most)
	}
	if swept > 1 {
		b.Errorf("%.1f bytes per bucket remain after the sweep, want about 0", swept)
	}
}

// heapAlloc returns the bytes of live heap objects, after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
