package redisstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/ratelimit"
	"github.com/caddymcp/caddy-mcp/redisstore"
	"github.com/caddymcp/caddy-mcp/test/redistest"
)

// Run with:
//
//	go test -run '^$' -bench Decision -benchmem ./redisstore/
//
// A decision in a redis-server on loopback, one at a time, and from 64
// goroutines at once (each its own client key): what a decision costs with
// the client this store uses (docs/performance.md, "The Redis client").
func newBenchStore(b *testing.B) (ratelimit.Store, ratelimit.Limit) {
	srv := redistest.Start(b)
	r := &redisstore.Redis{Addresses: []string{srv.URL()}}
	provisionIn(b, r)
	lim := ratelimit.Limit{Rate: ratelimit.Rate{Events: 1 << 30, Window: time.Second}, Burst: 1 << 30}
	return r.Store("bench", ratelimit.NewMemory(0)), lim
}

func BenchmarkDecision(b *testing.B) {
	store, lim := newBenchStore(b)
	b.ReportAllocs()
	for b.Loop() {
		if d := store.Take(time.Now(), "10.0.0.1", 1, lim); !d.Allowed || d.Unchecked {
			b.Fatalf("decision %+v", d)
		}
	}
}

func BenchmarkDecisionParallel64(b *testing.B) {
	store, lim := newBenchStore(b)
	var clients atomic.Int64
	b.SetParallelism((64 + 1) / 2) // 64 goroutines on GOMAXPROCS 2
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("10.0.0.%d", clients.Add(1))
		for pb.Next() {
			if d := store.Take(time.Now(), key, 1, lim); !d.Allowed || d.Unchecked {
				b.Errorf("decision %+v", d)
				return
			}
		}
	})
}

// Two limits of one request, decided together: one script, one round trip.
func BenchmarkDecisionTwoLimits(b *testing.B) {
	srv := redistest.Start(b)
	r := &redisstore.Redis{Addresses: []string{srv.URL()}}
	provisionIn(b, r)
	lim := ratelimit.Limit{Rate: ratelimit.Rate{Events: 1 << 30, Window: time.Second}, Burst: 1 << 30}
	reqs := []ratelimit.Request{
		{Store: r.Store("per_client", ratelimit.NewMemory(0)), Key: "10.0.0.1", Cost: 1, Limit: lim},
		{Store: r.Store("per_client_tool", ratelimit.NewMemory(0)), Key: "10.0.0.1/echo", Cost: 1, Limit: lim},
	}
	b.ReportAllocs()
	for b.Loop() {
		if denied, d := ratelimit.TakeAll(time.Now(), reqs); denied >= 0 || d.Unchecked {
			b.Fatalf("decision %d %+v", denied, d)
		}
	}
}
