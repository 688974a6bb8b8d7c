package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

func TestDeniedRequestTakesNoTokenFromOtherLimits(t *testing.T) {
	perClient, perTool, global := ratelimit.NewMemory(0), ratelimit.NewMemory(0), ratelimit.NewMemory(0)
	now := time.Now()
	roomy, tight := limit(1, time.Hour, 10), limit(1, time.Hour, 1)
	event := func(client string) []ratelimit.Request {
		return []ratelimit.Request{
			{Store: perClient, Key: client, Cost: 1, Limit: roomy},
			{Store: perTool, Key: "search", Cost: 1, Limit: tight},
			{Store: global, Key: "", Cost: 1, Limit: roomy},
		}
	}

	denied, _ := ratelimit.TakeAll(now, event("10.0.0.1"))
	require.Equal(t, -1, denied)
	denied, d := ratelimit.TakeAll(now, event("10.0.0.2"))
	require.Equal(t, 1, denied, "the per-tool limit denies the second call")
	assert.Equal(t, ratelimit.Decision{RetryAfter: time.Hour}, d)

	assert.Equal(t, 1, perClient.Len(), "10.0.0.2 was refunded back to full, so it holds no bucket")
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 9}, perClient.Take(now, "10.0.0.2", 1, roomy))
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 8}, global.Take(now, "", 1, roomy),
		"the global limit lost one token, not two")
}

func TestTakeAllReturnsTheLastDecisionWhenAllAllow(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()

	denied, d := ratelimit.TakeAll(now, []ratelimit.Request{
		{Store: m, Key: "a", Cost: 1, Limit: limit(1, time.Second, 5)},
		{Store: m, Key: "b", Cost: 2, Limit: limit(1, time.Second, 5)},
	})
	assert.Equal(t, -1, denied)
	assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 3}, d)
}

func TestTakeAllReportsTheFirstDenial(t *testing.T) {
	m := ratelimit.NewMemory(0)
	now := time.Now()
	lim := limit(1, time.Second, 1)
	require.True(t, m.Take(now, "b", 1, lim).Allowed)
	require.True(t, m.Take(now, "c", 1, lim).Allowed)

	denied, _ := ratelimit.TakeAll(now, []ratelimit.Request{
		{Store: m, Key: "a", Cost: 1, Limit: lim},
		{Store: m, Key: "b", Cost: 1, Limit: lim},
		{Store: m, Key: "c", Cost: 1, Limit: lim},
	})
	assert.Equal(t, 1, denied)
	assert.True(t, m.Take(now, "a", 1, lim).Allowed, "a was refunded")
}

func TestTakeAllWithNoRequestsAllows(t *testing.T) {
	denied, d := ratelimit.TakeAll(time.Now(), nil)
	assert.Equal(t, -1, denied)
	assert.True(t, d.Allowed)
}
