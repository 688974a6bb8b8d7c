package main

import (
	"math/bits"
	"time"
)

// subBits sets the histogram's precision: each power of two is split into
// 1<<subBits buckets of equal width, so a percentile is within 1/64 (1.6 %)
// of the true value.
const subBits = 6

// nBuckets covers every non-negative int64 nanosecond count.
const nBuckets = (64 - subBits) << subBits

// histogram counts latencies in log-linear buckets, as HdrHistogram does:
// recording is an index computation and an increment, so that the load
// generator spends its CPU on requests, not on bookkeeping. Each client owns
// one; they are merged when a measurement ends.
type histogram struct {
	counts   [nBuckets]uint64
	n        uint64
	min, max time.Duration
}

// bucketOf returns the bucket holding v nanoseconds: values below 1<<subBits
// have a bucket each; above, the bucket width doubles with every power of
// two.
func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	return (shift+1)<<subBits + int(v>>shift&(1<<subBits-1))
}

// bucketBounds returns the smallest value bucket i holds and its width.
func bucketBounds(i int) (low, width uint64) {
	if i < 1<<subBits {
		return uint64(i), 1
	}
	shift := i>>subBits - 1
	return (1<<subBits + uint64(i&(1<<subBits-1))) << shift, 1 << shift
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
}

// percentile returns the latency below which a fraction q of the recorded
// values fall: the middle of the bucket holding the value of that rank,
// clamped to the smallest and largest values recorded, which are exact.
func (h *histogram) percentile(q float64) time.Duration {
	switch {
	case h.n == 0:
		return 0
	case q <= 0:
		return h.min
	case q >= 1:
		return h.max
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := bucketBounds(i)
			v := time.Duration(low + width/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}
