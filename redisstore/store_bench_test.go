package redisstore

import "testing"

// Run with:
//
//	go test -run '^$' -bench BucketKey -benchmem ./redisstore/
//
// The Redis key of a bucket, made for every decision: for a short key (an
// address) and for an Authorization header as a key reads it.
func BenchmarkBucketKey(b *testing.B) {
	s := newStore(nil, "caddy-mcp:", "per_client", Local, nil)
	for _, bench := range []struct{ name, key string }{
		{"address", "10.0.0.1"},
		{"authorization", "bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmbGVldDEifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if k := s.bucketKey(bench.key); len(k) == 0 {
					b.Fatal("no key")
				}
			}
		})
	}
}
