// Package ratelimit limits events per key with token buckets.
//
// A bucket holds at most Burst tokens and refills continuously at a Rate of
// Events per Window. A key's first event finds its bucket full. An event of
// cost n is allowed when the bucket holds n tokens, and takes them; a denied
// event takes nothing and learns from Decision.RetryAfter how long until n
// tokens will have refilled. A Limit's settings are not stored with its
// buckets but passed on every call, so a changed rate or burst applies to the
// existing buckets at once.
//
// As in golang.org/x/time/rate, every method takes the current time from its
// caller, so tests need no sleeps and no global clock. Times are read
// monotonically, and a time earlier than a bucket's last change counts as
// that change: a clock going backwards neither adds nor removes tokens.
//
// Memory, the in-process Store, keeps its memory bounded in two ways. First,
// a bucket that has refilled completely is equivalent to no bucket, so it is
// dropped: by Sweep (which Run calls periodically), and by any Take or Refund
// that leaves it full, so a denied or refunded event holds no memory. Second,
// it holds at most maxKeys buckets. A new key that arrives at that cap does
// not get a bucket of its own: all such keys share one overflow bucket under
// the same Limit, until Sweep makes room. Memory stays bounded whatever the
// number of keys, and a client that sprays keys to escape its limit gets the
// limit's rate in total, not per key; the price is that new, well-behaved
// keys share that bucket too while the store is at its cap. A bucket keyed by
// an IPv4 address takes about 120 bytes of heap, key included.
//
// Store is the seam for a store shared by several nodes (package redisstore
// keeps buckets in Redis); Memory is the in-process one. TakeAll applies
// several limits to one event, all or nothing, over any Stores; stores that
// share a Batch (one Redis) have all their decisions made in one exchange.
package ratelimit
