package cputime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A thread that waits spends no CPU time; one that works spends it.
func TestOfCountsWorkNotWaiting(t *testing.T) {
	waited := Of(func() { time.Sleep(200 * time.Millisecond) })
	assert.Less(t, waited, 100*time.Millisecond)

	sum := 0
	worked := Of(func() {
		for i := range 50_000_000 {
			sum += i % 7
		}
	})
	assert.Positive(t, sum)
	assert.Greater(t, worked, time.Millisecond)
}
