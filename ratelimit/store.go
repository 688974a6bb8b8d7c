package ratelimit

import "time"

// Decision is the outcome of taking tokens from a bucket.
type Decision struct {
	// Allowed reports whether the tokens were taken.
	Allowed bool
	// RetryAfter is, when denied, the exact time until enough tokens will
	// have refilled for the cost; the caller rounds it as its protocol needs.
	// It is 0 when allowed.
	RetryAfter time.Duration
	// Remaining is the whole tokens left after the decision, for information.
	Remaining int
	// Unchecked: the store could not decide (a shared store that does not
	// answer, configured to refuse then), and denies for RetryAfter. The
	// client is not over its limit.
	Unchecked bool
}

// Store holds the buckets of one named limit, by key.
//
// The settings are passed on every call rather than stored, so a changed
// rate or burst applies to existing buckets at once. A cost of zero or less
// takes or gives back nothing. A cost greater than the Limit's Burst can
// never be allowed: Take denies it with RetryAfter set to the time a bucket
// takes to refill from empty.
//
// Store is the seam for a store shared by several nodes; Memory is the
// in-process implementation.
type Store interface {
	// Take takes cost tokens from key's bucket at now, if it holds them.
	Take(now time.Time, key string, cost int, lim Limit) Decision
	// Refund gives back cost tokens taken from key's bucket by an earlier
	// Take, as TakeAll does when another limit denies the same event. It
	// should follow that Take closely.
	Refund(now time.Time, key string, cost int, lim Limit)
	// Len returns the number of live buckets.
	Len() int
}
