package ratelimit

import "time"

// Request is one limit's share of an event: take Cost tokens from Key's
// bucket in Store, under Limit.
type Request struct {
	Store Store
	Key   string
	Cost  int
	Limit Limit
}

// TakeAll takes each request's tokens, all or nothing: when one request is
// denied, the tokens already taken for the requests before it are refunded,
// so an event denied by one limit spends no token of any other. It returns
// the index of the denying request and its Decision, or -1 and the last
// request's Decision when all are allowed (an allowed zero Decision when
// there are none).
//
// All or nothing is about tokens, not isolation: between a Take and its
// Refund, a concurrent event may find those tokens missing.
func TakeAll(now time.Time, reqs []Request) (denied int, d Decision) {
	if b := commonBatch(reqs); b != nil {
		return takeBatched(now, b, reqs)
	}
	d = Decision{Allowed: true}
	for i, r := range reqs {
		d = r.Store.Take(now, r.Key, r.Cost, r.Limit)
		if !d.Allowed {
			for _, taken := range reqs[:i] {
				taken.Store.Refund(now, taken.Key, taken.Cost, taken.Limit)
			}
			return i, d
		}
	}
	return -1, d
}

// A Batcher is a Store whose decisions can be made together with those of
// other stores of the same Batch: in one exchange with what keeps their
// buckets (one round trip to a shared store, however many limits a request
// meets).
type Batcher interface {
	Store
	// Batch is what the store decides with; stores returning the same
	// Batch decide together.
	Batch() Batch
}

// A Batch makes several stores' decisions at once.
type Batch interface {
	// TakeAll sets out[i] to what reqs[i].Store.Take would decide, making
	// every decision at once, all or nothing as the package's TakeAll: when
	// one is denied, no request keeps its tokens.
	TakeAll(now time.Time, reqs []Request, out []Decision)
	// RefundEach gives back each request's tokens, as Store.Refund would,
	// all at once.
	RefundEach(now time.Time, reqs []Request)
}

// RefundAll gives back the tokens of reqs, taken by an event that will not
// happen after all (TakeAll allowed it, then something else refused it):
// at once where their stores share a Batch.
func RefundAll(now time.Time, reqs []Request) {
	if b := commonBatch(reqs); b != nil {
		b.RefundEach(now, reqs)
		return
	}
	for _, r := range reqs {
		r.Store.Refund(now, r.Key, r.Cost, r.Limit)
	}
}

// commonBatch is the Batch every request's store shares, or nil when they
// do not all share one (or there is a single request, which gains nothing).
func commonBatch(reqs []Request) Batch {
	if len(reqs) < 2 {
		return nil
	}
	first, ok := reqs[0].Store.(Batcher)
	if !ok {
		return nil
	}
	b := first.Batch()
	for _, r := range reqs[1:] {
		if s, ok := r.Store.(Batcher); !ok || s.Batch() != b {
			return nil
		}
	}
	return b
}

// takeBatched is TakeAll with every decision made at once, by the batch.
func takeBatched(now time.Time, b Batch, reqs []Request) (denied int, d Decision) {
	out := make([]Decision, len(reqs))
	b.TakeAll(now, reqs, out)
	for i, o := range out {
		if !o.Allowed {
			return i, o
		}
	}
	return -1, out[len(out)-1]
}
