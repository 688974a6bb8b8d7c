package busytest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/busy/busytest"
)

func TestAdvanceCallsDueFunctionsInTimeOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := busytest.NewClock(start)
	var calls []string
	c.AfterFunc(3*time.Second, func() { calls = append(calls, "3s") })
	c.AfterFunc(time.Second, func() { calls = append(calls, "1s") })
	stop := c.AfterFunc(2*time.Second, func() { calls = append(calls, "2s") })
	c.AfterFunc(5*time.Second, func() { calls = append(calls, "5s") })

	assert.True(t, stop())
	assert.False(t, stop(), "a timer stops once")
	c.Advance(time.Second - time.Nanosecond)
	assert.Empty(t, calls)
	c.Advance(3 * time.Second)
	assert.Equal(t, []string{"1s", "3s"}, calls)
	assert.Equal(t, start.Add(4*time.Second-time.Nanosecond), c.Now())
}

func TestFiredTimerCannotBeStopped(t *testing.T) {
	c := busytest.NewClock(time.Time{})
	fired := false
	stop := c.AfterFunc(time.Second, func() { fired = true })
	c.Advance(time.Second)
	assert.True(t, fired)
	assert.False(t, stop())
}
