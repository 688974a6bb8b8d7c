package ratelimit

import (
	"math"
	"time"
)

// forever stands in for a wait too long to matter (about 73 years). It keeps
// sums of times from overflowing when a rate is extremely slow.
const forever = math.MaxInt64 / 4

// bucket is the state of one key's token bucket. Times are nanoseconds since
// the base of the Memory that holds it. It stores no settings: the Limit
// comes with every call.
type bucket struct {
	tokens float64 // held at last, possibly above a Burst that has since been lowered
	last   int64   // when tokens was set
	full   int64   // when the bucket will have refilled completely, under the Limit that set it
}

func newBucket(t int64, lim Limit) bucket {
	return bucket{tokens: float64(lim.Burst), last: t, full: t}
}

// at returns the tokens held at t, for the record: whether the bucket holds
// a number of tokens is decided by readyAt. A t before last counts as last,
// so a clock going backwards neither adds nor removes tokens.
func (b bucket) at(t int64, lim Limit) float64 {
	tokens := b.tokens
	if t > b.last {
		tokens += lim.Rate.tokensIn(t - b.last)
	}
	return min(tokens, float64(lim.Burst))
}

// readyAt returns the first nanosecond, from last on, at which the bucket
// holds n tokens, n being at most the burst. Deciding in whole nanoseconds rather than by
// comparing fractional tokens makes RetryAfter exact: a retry one
// nanosecond sooner would be denied.
func (b bucket) readyAt(n float64, r Rate) int64 {
	if b.tokens >= n {
		return b.last
	}
	return b.last + int64(math.Ceil(min(r.timeFor(n-b.tokens), forever)))
}

// take returns the bucket after an attempt to take cost tokens at t, and the
// decision.
func (b bucket) take(t int64, cost int, lim Limit) (bucket, Decision) {
	n := float64(max(cost, 0))
	if cost > lim.Burst {
		wait := math.Ceil(min(lim.Rate.timeFor(float64(lim.Burst)), forever))
		return b.under(lim), Decision{RetryAfter: time.Duration(wait), Remaining: int(b.at(t, lim))}
	}
	// A t before last counts as last: the tokens held then are held still.
	if ready := b.readyAt(n, lim.Rate); max(t, b.last) < ready {
		return b.under(lim), Decision{RetryAfter: time.Duration(ready - t), Remaining: min(int(b.at(t, lim)), cost-1)}
	}
	tokens := max(b.at(t, lim)-n, 0)
	return b.set(tokens, max(t, b.last), lim), Decision{Allowed: true, Remaining: int(tokens)}
}

// refund returns the bucket after cost tokens are given back at t.
func (b bucket) refund(t int64, cost int, lim Limit) bucket {
	tokens := min(b.at(t, lim)+float64(max(cost, 0)), float64(lim.Burst))
	return b.set(tokens, max(t, b.last), lim)
}

func (b bucket) set(tokens float64, t int64, lim Limit) bucket {
	return bucket{tokens: tokens, last: t}.under(lim)
}

// under returns b with its full time judged under lim, which may differ from
// the Limit that last set it.
func (b bucket) under(lim Limit) bucket {
	b.full = b.readyAt(float64(lim.Burst), lim.Rate)
	return b
}

// refilled reports whether the bucket is full at t, and so equivalent to no
// bucket.
func (b bucket) refilled(t int64) bool { return b.full <= t }
