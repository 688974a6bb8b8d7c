package limits

import (
	"net/http"
	"sync"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// Limits are a handler's rate limits, as one feature.Admitter: every
// message takes a token from each limit that counts it, under the key the
// limit gives it, all or nothing across the limits, so that a batch takes
// one token per message it holds. Tokens are given back when the request
// never runs (feature.Undo).
type Limits []*Limit

// Admit takes x's tokens, or refuses x with the first limit whose bucket
// holds too few.
func (ls Limits) Admit(x *feature.Exchange) (feature.Undo, *feature.Refusal) {
	t := takings.Get().(*taking)
	c := &t.costs
	for i := range x.Messages {
		m := &x.Messages[i]
		for _, l := range ls {
			if l.applies(m) {
				c.add(l, l.key.Eval(x, m))
			}
		}
	}
	if len(c.reqs) == 0 {
		t.recycle()
		return nil, nil
	}
	denied, d := ratelimit.TakeAll(x.Start, c.reqs)
	if denied < 0 {
		for _, l := range c.owners {
			l.allowed.Inc()
		}
		return t, nil
	}
	l, r := c.owners[denied], c.reqs[denied]
	t.recycle()
	l.denied.Inc()
	ref := &feature.Refusal{Status: http.StatusTooManyRequests, By: feature.Rule{Kind: "limit", Name: l.name, Key: r.Key, Keyed: true}}
	switch {
	case d.Unchecked:
		ref.Envelope, ref.Status = unchecked(l, d.RetryAfter), http.StatusServiceUnavailable
	case r.Cost > l.lim.Burst:
		ref.Envelope = batchOverBurst(l, r.Cost)
	default:
		ref.Envelope = rateLimited(l, d.RetryAfter)
	}
	return nil, ref
}

// taking is the tokens one request took. Takings are recycled, so that
// admitting a request allocates nothing: the buffers hold the tokens of a
// request of a few limits and keys.
type taking struct {
	costs    costs
	reqBuf   [4]ratelimit.Request
	ownerBuf [4]*Limit
}

var takings = sync.Pool{New: func() any {
	t := new(taking)
	t.costs = costs{reqs: t.reqBuf[:0], owners: t.ownerBuf[:0]}
	return t
}}

// Undo gives the tokens back when the request did not run.
func (t *taking) Undo(now time.Time, ran bool) {
	if !ran {
		ratelimit.RefundAll(now, t.costs.reqs)
	}
	t.recycle()
}

// recycle forgets the tokens (and the keys and stores they hold), and
// returns t to the pool.
func (t *taking) recycle() {
	clear(t.reqBuf[:])
	clear(t.ownerBuf[:])
	t.costs = costs{reqs: t.reqBuf[:0], owners: t.ownerBuf[:0]}
	takings.Put(t)
}

// costs are the tokens a request takes: one request per limit and key,
// costing one token per message counted. A batch of many keys is indexed,
// so that adding stays constant time.
type costs struct {
	reqs   []ratelimit.Request
	owners []*Limit
	index  map[costKey]int
}

type costKey struct {
	l   *Limit
	key string
}

// indexFrom is the number of requests from which costs are indexed.
const indexFrom = 8

func (c *costs) add(l *Limit, key string) {
	if c.index == nil && len(c.reqs) >= indexFrom {
		c.index = make(map[costKey]int, 2*len(c.reqs))
		for i := range c.reqs {
			c.index[costKey{c.owners[i], c.reqs[i].Key}] = i
		}
	}
	if i := c.find(l, key); i >= 0 {
		c.reqs[i].Cost++
		return
	}
	if c.index != nil {
		c.index[costKey{l, key}] = len(c.reqs)
	}
	c.reqs = append(c.reqs, ratelimit.Request{Store: l.store, Key: key, Cost: 1, Limit: l.lim})
	c.owners = append(c.owners, l)
}

// find returns the index of the request for (l, key), or -1.
func (c *costs) find(l *Limit, key string) int {
	if c.index != nil {
		if i, ok := c.index[costKey{l, key}]; ok {
			return i
		}
		return -1
	}
	for i := range c.reqs {
		if c.owners[i] == l && c.reqs[i].Key == key {
			return i
		}
	}
	return -1
}
