package resultstore

import (
	"errors"
	"time"

	"github.com/caddyserver/certmagic"
)

// Store keeps results in a certmagic.Storage. Its methods may be called
// at once from many goroutines.
type Store struct {
	storage certmagic.Storage
	keys    keys
	lim     Limits
	now     func() time.Time
	ledger  *ledger
	sweeper sweeper
	chunks  chunkCache
}

// Open is a store on storage, its results encrypted under keys derived
// from key (at least MinKey bytes: HKDF-SHA256, info "caddy-mcp results
// v1": one key to encrypt, one to seal ids and bind owners), within lim
// (its zero fields defaulted), reading the time from clock (time.Now when
// nil). Stores that share a storage and a key share their results; each
// counts what it keeps against lim on its own (OpenShared: together).
func Open(storage certmagic.Storage, key []byte, lim Limits, clock func() time.Time) (*Store, error) {
	l, err := NewLedger(lim)
	if err != nil {
		return nil, err
	}
	return OpenShared(storage, key, l, clock)
}

// A Ledger counts what stores keep against their Limits: by owner, the
// bytes and results not yet expired. Stores opened on one Ledger
// (OpenShared) count together, so that a store opened anew on the same
// storage and key, such as a reloaded config's, does not start its
// callers' counts from zero while what they kept before is still kept.
type Ledger struct{ l *ledger }

// NewLedger is a Ledger of the bounds lim (its zero fields defaulted).
func NewLedger(lim Limits) (*Ledger, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Ledger{newLedger(lim)}, nil
}

// OpenShared is Open, counting against ledger, whose Limits are the
// store's. The stores of one ledger must share the key, since owners are
// counted by a digest the key derives.
func OpenShared(storage certmagic.Storage, key []byte, ledger *Ledger, clock func() time.Time) (*Store, error) {
	if storage == nil {
		return nil, errors.New("resultstore: no storage")
	}
	k, err := deriveKeys(key)
	if err != nil {
		return nil, err
	}
	if clock == nil {
		clock = time.Now
	}
	return &Store{storage: storage, keys: k, lim: ledger.l.lim, now: clock, ledger: ledger.l}, nil
}

// Limits is the store's limits, defaults applied.
func (s *Store) Limits() Limits { return s.lim }

// MaxRead is the most bytes one Read gives: twice the store's chunk, so
// that a Read holds at most that, one stored chunk and its plaintext,
// however its range falls across chunks.
func (s *Store) MaxRead() int { return 2 * s.lim.Chunk }

var (
	// ErrNotFound is Read's answer for any id its caller may not read:
	// made up, malformed, another owner's, expired, deleted, still being
	// written or sealed under another key; one error, so that no answer
	// tells whether a result exists.
	ErrNotFound = errors.New("resultstore: no such result")
	// ErrTooLarge is a Write that would take a result past
	// Limits.MaxResult.
	ErrTooLarge = errors.New("resultstore: the result is over its bound")
	// ErrExpired is a Write or Close of a result whose TTL passed before
	// it was closed.
	ErrExpired = errors.New("resultstore: the result expired before it was closed")
	// ErrCorrupt is a chunk of a result its owner may read that does not
	// open: altered, or moved from elsewhere in the storage.
	ErrCorrupt = errors.New("resultstore: a stored chunk does not open")
)

// Why a *QuotaError refused.
const (
	// WhyPerOwnerCount: the owner keeps Limits.PerOwnerCount results.
	WhyPerOwnerCount = "per_owner_count"
	// WhyPerOwnerBytes: the owner's results would pass Limits.PerOwner
	// bytes.
	WhyPerOwnerBytes = "per_owner_bytes"
	// WhyTotal: the store's results would pass Limits.Total bytes or
	// Limits.TotalCount results.
	WhyTotal = "total"
)

// QuotaError refuses a result, or bytes of one, because its owner or the
// store is full (this node's count).
type QuotaError struct {
	// Why is WhyPerOwnerCount, WhyPerOwnerBytes or WhyTotal.
	Why string
}

func (e *QuotaError) Error() string { return "resultstore: full: " + e.Why }

// Status is what a store keeps, as this node counts it (what it wrote
// and has not expired), and its last sweep.
type Status struct {
	// Results is the results kept, Writing those still being written.
	Results int `json:"results"`
	Writing int `json:"writing"`
	// Bytes is the bytes of the results kept.
	Bytes int64 `json:"bytes"`
	// Owners is the owners of the results kept.
	Owners int `json:"owners"`
	// LastSweep is when Sweep last ran, LastSwept the results it deleted
	// and LastSweepError its error, if it failed.
	LastSweep      time.Time `json:"last_sweep,omitzero"`
	LastSwept      int       `json:"last_swept"`
	LastSweepError string    `json:"last_sweep_error,omitempty"`
}

// Status is what the store keeps now, and its last sweep.
func (s *Store) Status() Status {
	st := s.ledger.status(s.now())
	s.sweeper.mu.Lock()
	st.LastSweep, st.LastSwept, st.LastSweepError = s.sweeper.last, s.sweeper.swept, s.sweeper.err
	s.sweeper.mu.Unlock()
	return st
}
