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
