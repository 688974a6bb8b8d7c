package resultstore

import (
	"sync"
	"time"
)

// ledger is this node's account of the results it wrote and keeps: by
// owner, the bytes and the results not yet expired, writers included. It
// lives in memory only, and starts empty: what other nodes, or this one
// before a restart, wrote counts against their bounds, not this one's.
type ledger struct {
	lim    Limits
	mu     sync.Mutex
	owners map[ownerKey]*account
	bytes  int64
	count  int
}

// account is one owner's results, by id.
type account struct {
	bytes   int64
	results map[string]*held
}

// held is one result as the ledger counts it.
type held struct {
	size    int64
	expires time.Time
	// writing is true until the result's Writer closed.
	writing bool
}

// expired tells whether what expires at t has expired at now.
func expired(now, t time.Time) bool { return !now.Before(t) }

func newLedger(lim Limits) *ledger {
	return &ledger{lim: lim, owners: make(map[ownerKey]*account)}
}

// open counts a new result of owner, expiring at expires, or refuses it
// with a *QuotaError when the owner or the store is full.
func (l *ledger) open(owner ownerKey, id string, now, expires time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.owners[owner]
	if a != nil {
		l.pruneAccount(owner, a, now)
	}
	if a != nil && len(a.results) >= l.lim.PerOwnerCount {
		return &QuotaError{Why: WhyPerOwnerCount}
	}
	if a != nil && a.bytes >= l.lim.PerOwner {
		return &QuotaError{Why: WhyPerOwnerBytes}
	}
	if !l.room(0, 1, now) {
		return &QuotaError{Why: WhyTotal}
	}
	if a == nil || len(a.results) == 0 {
		a = &account{results: make(map[string]*held)}
		l.owners[owner] = a
	}
	a.results[id] = &held{expires: expires, writing: true}
	l.count++
	return nil
}

// grow adds n bytes to a result being written, or refuses them with a
// *QuotaError when its owner's or the store's bytes would pass their
// bound, or ErrExpired when the result expired (or was released).
func (l *ledger) grow(owner ownerKey, id string, n int64, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.owners[owner]
	var h *held
	if a != nil {
		h = a.results[id]
	}
	if h == nil || expired(now, h.expires) {
		return ErrExpired
	}
	if a.bytes+n > l.lim.PerOwner {
		l.pruneAccount(owner, a, now) // h is live: a stays
		if a.bytes+n > l.lim.PerOwner {
			return &QuotaError{Why: WhyPerOwnerBytes}
		}
	}
	if !l.room(n, 0, now) {
		return &QuotaError{Why: WhyTotal}
	}
	h.size += n
	a.bytes += n
	l.bytes += n
	return nil
}

// room tells whether the store has room for n more bytes and c more
// results, pruning what expired when it seems not to.
func (l *ledger) room(n int64, c int, now time.Time) bool {
	fits := func() bool { return l.bytes+n <= l.lim.Total && l.count+c <= l.lim.TotalCount }
	if fits() {
		return true
	}
	l.prune(now)
	return fits()
}

// closed notes that a result's Writer closed: ErrExpired when the result
// expired meanwhile (or was released).
func (l *ledger) closed(owner ownerKey, id string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.owners[owner]; a != nil {
		if h := a.results[id]; h != nil && !expired(now, h.expires) {
			h.writing = false
			return nil
		}
	}
	return ErrExpired
}

// release forgets a result, giving its bytes back; a result forgotten
// already (expired) is no error.
func (l *ledger) release(owner ownerKey, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.owners[owner]; a != nil {
		if h := a.results[id]; h != nil {
			l.forget(owner, a, id, h)
		}
	}
}

func (l *ledger) forget(owner ownerKey, a *account, id string, h *held) {
	delete(a.results, id)
	a.bytes -= h.size
	l.bytes -= h.size
	l.count--
	if len(a.results) == 0 {
		delete(l.owners, owner)
	}
}

// prune forgets every result that expired at now.
func (l *ledger) prune(now time.Time) {
	for owner, a := range l.owners {
		l.pruneAccount(owner, a, now)
	}
}

func (l *ledger) pruneAccount(owner ownerKey, a *account, now time.Time) {
	for id, h := range a.results {
		if expired(now, h.expires) {
			l.forget(owner, a, id, h)
		}
	}
}

// status is what the ledger counts at now.
func (l *ledger) status(now time.Time) Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	st := Status{Results: l.count, Bytes: l.bytes, Owners: len(l.owners)}
	for _, a := range l.owners {
		for _, h := range a.results {
			if h.writing {
				st.Writing++
			}
		}
	}
	return st
}
