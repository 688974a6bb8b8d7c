package main

import (
	"math"
	"slices"
)

// interval is a median with a confidence interval that assumes nothing of
// the figures' distribution: the order statistics a binomial(n, ½) puts
// outside with at most 2.5 % on each side, as benchstat computes its
// interval of a median. With few rounds no such pair exists: the interval
// is then the smallest and the largest, with the confidence they give.
type interval struct {
	Median float64 `json:"median"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	// Confidence is the probability that the interval holds the true
	// median: 0.95 or more from 6 rounds on.
	Confidence float64 `json:"confidence"`
	N          int     `json:"n"`
}

// medianInterval is the median of xs with its interval; nil when xs is
// empty.
func medianInterval(xs []float64) *interval {
	n := len(xs)
	if n == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	iv := &interval{Median: spreadOf(s).Median, N: n}
	// k is how many figures fall outside on each side; below is the
	// probability that a binomial(n, ½) is less than k.
	k, below := 0, 0.0
	p := math.Pow(0.5, float64(n)) // P(B = j), from j = 0
	cum := 0.0
	for j := 0; j < n/2; j++ {
		cum += p
		if cum > 0.025 {
			break
		}
		k, below = j+1, cum
		p = p * float64(n-j) / float64(j+1)
	}
	if k == 0 {
		iv.Low, iv.High, iv.Confidence = s[0], s[n-1], 1-2*math.Pow(0.5, float64(n))
		return iv
	}
	iv.Low, iv.High, iv.Confidence = s[k-1], s[n-k], 1-2*below
	return iv
}
