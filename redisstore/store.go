package redisstore

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// bucketScript is the Lua script that takes or gives back tokens: one round
// trip per decision, on Redis's clock.
//
//go:embed bucket.lua
var bucketScript string

// OnError is what a store does with a decision Redis cannot make within
// its timeout.
type OnError string

const (
	// Local decides with the node's own buckets: every limit still holds,
	// per node.
	Local OnError = "local"
	// Allow lets every request through.
	Allow OnError = "allow"
	// Deny refuses every request, for a short while (DenyRetryAfter).
	Deny OnError = "deny"
)

// DenyRetryAfter is when a request refused because Redis could not decide
// is told to retry: the breaker probes Redis every probeEvery.
const DenyRetryAfter = 2 * time.Second

// Store is one rate limit's buckets in Redis, a ratelimit.Store. When Redis
// cannot decide, it decides as its OnError says, with local as the node's
// own buckets.
//
// A bucket is one Redis key: the key prefix, then the limit's name and a
// digest of the bucket's key in braces, a hash tag. A decision touches one
// key, so it is atomic on one node of a cluster, and the tag spreads the
// buckets over the slots by limit and key. Redis never holds a key as the
// client sent it: keys are tokens and addresses, and whoever reads Redis
// (a replica, a backup, MONITOR) would read every client's.
type Store struct {
	b *backend
	// head is the bucket keys' beginning: the prefix, "{", the limit's
	// name (escaped) and ":".
	head    string
	onError OnError
	local   ratelimit.Store
	// args is the last Limit the store decided under, as the script reads
	// it: made again only when the Limit changes (a reload).
	args atomic.Pointer[limitArgs]
}

// limitArgs is a Limit's burst, events and window (nanoseconds), written
// out for the bucket script.
type limitArgs struct {
	lim  ratelimit.Limit
	text [3]string
}

var _ ratelimit.Batcher = (*Store)(nil)

// newStore is the named limit's store on b.
func newStore(b *backend, prefix, limit string, onError OnError, local ratelimit.Store) *Store {
	if strings.ContainsAny(limit, "{}%:") {
		limit = nameEscaper.Replace(limit)
	}
	return &Store{b: b, head: prefix + "{" + limit + ":", onError: onError, local: local}
}

// bucketKey is the Redis key of key's bucket: the head, the first 128 bits
// of the SHA-256 of key in hex (32 digits), and the brace closing the tag.
// 128 bits keep collisions out of reach (an even chance of one takes 2^64
// keys), hex digits cannot end the tag early, and an operator finds the
// bucket of a key they know (printf %s "$KEY" | sha256sum | cut -c1-32).
// The limit's name is escaped, colons included, so that no name ends the
// tag early or reads as another's.
func (s *Store) bucketKey(key string) string {
	var buf [keyOnStack]byte
	sum := sha256.Sum256(append(buf[:0], key...))
	var digest [2 * digestBytes]byte
	hex.Encode(digest[:], sum[:digestBytes])
	return s.head + string(digest[:]) + "}"
}

const (
	// digestBytes is the part of a key's SHA-256 a bucket key holds.
	digestBytes = 16
	// keyOnStack is the longest key hashed without an allocation: rate
	// limits keep a key in at most 128 bytes.
	keyOnStack = 128
)

var nameEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D", ":", "%3A")

// appendArgs appends the bucket script's arguments for one bucket: cost,
// burst, events and window.
func (s *Store) appendArgs(args []string, cost int, lim ratelimit.Limit) []string {
	a := s.args.Load()
	if a == nil || a.lim != lim {
		a = &limitArgs{lim: lim, text: [3]string{strconv.Itoa(lim.Burst), strconv.Itoa(lim.Rate.Events), strconv.FormatInt(int64(lim.Rate.Window), 10)}}
		s.args.Store(a)
	}
	return append(args, strconv.Itoa(cost), a.text[0], a.text[1], a.text[2])
}

// Take takes cost tokens from key's bucket, on Redis's clock (now is only
// used when Redis cannot decide and local does).
func (s *Store) Take(now time.Time, key string, cost int, lim ratelimit.Limit) ratelimit.Decision {
	var out [1]ratelimit.Decision
	s.b.TakeAll(now, []ratelimit.Request{{Store: s, Key: key, Cost: cost, Limit: lim}}, out[:])
	return out[0]
}

// Batch is the Redis the store decides in: the stores of one Redis decide
// a request's limits together.
func (s *Store) Batch() ratelimit.Batch { return s.b }

// decision reads the bucket script's answer.
func decision(res [3]int64) ratelimit.Decision {
	return ratelimit.Decision{
		Allowed:    res[0] == 1,
		RetryAfter: time.Duration(min(res[1], maxWaitMicros)) * time.Microsecond,
		Remaining:  int(res[2]),
	}
}

// maxWaitMicros caps a wait as the in-process store caps it (about 73
// years), so that a rate of a few events in centuries cannot overflow a
// Duration.
const maxWaitMicros = math.MaxInt64 / 4 / 1000

// Refund gives back cost tokens; when Redis cannot take them back, they
// go to the node's own bucket (uncheckedRefund).
func (s *Store) Refund(now time.Time, key string, cost int, lim ratelimit.Limit) {
	if cost <= 0 {
		return
	}
	s.b.RefundEach(now, []ratelimit.Request{{Store: s, Key: key, Cost: cost, Limit: lim}})
}

// Len is the node's own live buckets: Redis's are not counted from here.
func (s *Store) Len() int { return s.local.Len() }

// unchecked is the decision when Redis could not make it.
func (s *Store) unchecked(now time.Time, key string, cost int, lim ratelimit.Limit) ratelimit.Decision {
	switch s.onError {
	case Allow:
		return ratelimit.Decision{Allowed: true}
	case Deny:
		return ratelimit.Decision{RetryAfter: DenyRetryAfter, Unchecked: true}
	}
	return s.local.Take(now, key, cost, lim)
}

// uncheckedRefund gives back tokens Redis cannot take back, or did not
// take: the node's own bucket holds them where on_error is local (if it
// decided the Take, it holds them; if not, it ignores a refund to a full
// bucket).
func (s *Store) uncheckedRefund(now time.Time, key string, cost int, lim ratelimit.Limit) {
	if s.onError == Local {
		s.local.Refund(now, key, cost, lim)
	}
}

// validPrefix reports whether a key prefix is usable: a brace would start a
// hash tag and put every bucket on one slot of a cluster.
func validPrefix(p string) bool { return !strings.ContainsAny(p, "{}") }
