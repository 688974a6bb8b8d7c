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

// batched is a Memory whose decisions a shared batch makes together, as
// a store on a remote server would.
type batched struct {
	*ratelimit.Memory
	b *countingBatch
}

func (s batched) Batch() ratelimit.Batch { return s.b }

type countingBatch struct{ calls, refunds int }

func (b *countingBatch) RefundEach(now time.Time, reqs []ratelimit.Request) {
	b.refunds++
	for _, r := range reqs {
		r.Store.Refund(now, r.Key, r.Cost, r.Limit)
	}
}

func (b *countingBatch) TakeAll(now time.Time, reqs []ratelimit.Request, out []ratelimit.Decision) {
	b.calls++
	denied := false
	for i, r := range reqs {
		out[i] = r.Store.Take(now, r.Key, r.Cost, r.Limit)
		denied = denied || !out[i].Allowed
	}
	if !denied {
		return
	}
	for i, r := range reqs {
		if out[i].Allowed {
			r.Store.Refund(now, r.Key, r.Cost, r.Limit)
		}
	}
}

// Stores of one batch decide a request's limits in one call, with the same
// outcome as one by one: all or nothing.
func TestStoresOfOneBatchDecideTogether(t *testing.T) {
	b := &countingBatch{}
	perClient, global := batched{ratelimit.NewMemory(0), b}, batched{ratelimit.NewMemory(0), b}
	other := batched{ratelimit.NewMemory(0), &countingBatch{}}
	now := time.Now()
	roomy, tight := limit(1, time.Hour, 10), limit(1, time.Hour, 1)
	event := func(client string) []ratelimit.Request {
		return []ratelimit.Request{
			{Store: perClient, Key: client, Cost: 1, Limit: roomy},
			{Store: global, Key: "", Cost: 1, Limit: tight},
		}
	}
	denied, _ := ratelimit.TakeAll(now, event("a"))
	require.Equal(t, -1, denied)
	assert.Equal(t, 1, b.calls, "one call for both limits")

	denied, d := ratelimit.TakeAll(now, event("b"))
	require.Equal(t, 1, denied)
	assert.Equal(t, time.Hour, d.RetryAfter)
	assert.Equal(t, 1, perClient.Len(), "a's bucket only: b's token came back, and its bucket is full again")
	assert.Equal(t, 2, b.calls, "denied in one call, all or nothing")

	ratelimit.RefundAll(now, event("a"))
	assert.Equal(t, 1, b.refunds, "a refund of a whole event is one call")
	assert.Equal(t, 0, perClient.Len(), "a's token came back")

	// Stores of different batches, or a single request, go one by one.
	denied, _ = ratelimit.TakeAll(now, []ratelimit.Request{{Store: perClient, Key: "c", Cost: 1, Limit: roomy}, {Store: other, Key: "c", Cost: 1, Limit: roomy}})
	require.Equal(t, -1, denied)
	assert.Equal(t, 2, b.calls)
}
