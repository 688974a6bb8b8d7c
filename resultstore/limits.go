package resultstore

import (
	"errors"
	"fmt"
	"time"
)

// The bounds and defaults of Limits.
const (
	// MinChunk and MaxChunk bound Limits.Chunk: a smaller chunk costs a
	// storage key and an encryption's overhead every few bytes; a larger
	// one is memory every Writer and Read holds.
	MinChunk = 4 << 10
	MaxChunk = 16 << 20
	// MaxTTL bounds Limits.TTL. A result that no key of the store opens
	// (sealed before the key changed) is deleted by Sweep once its storage
	// time is MaxTTL old: it expired by then, whatever store wrote it.
	MaxTTL = 7 * 24 * time.Hour

	DefaultChunk         = 1 << 20
	DefaultMaxResult     = 256 << 20
	DefaultPerOwner      = 1 << 30
	DefaultPerOwnerCount = 64
	DefaultTotal         = 16 << 30
	DefaultTotalCount    = 16384
	DefaultTTL           = time.Hour
)

// Limits bound what a Store keeps. A zero field takes its default.
type Limits struct {
	// Chunk is the bytes encrypted and stored at once: the buffer each
	// Writer holds. Between MinChunk and MaxChunk; default 1 MiB.
	Chunk int
	// MaxResult is the bytes of one result; default 256 MiB.
	MaxResult int64
	// PerOwner is the bytes of results kept per owner; default 1 GiB.
	PerOwner int64
	// PerOwnerCount is the results kept per owner; default 64.
	PerOwnerCount int
	// Total is the bytes of results kept in all (this node's count);
	// default 16 GiB.
	Total int64
	// TotalCount is the results kept in all (this node's count), empty
	// ones included, which Total does not bound; default 16384. A store
	// refuses past it as past Total (WhyTotal).
	TotalCount int
	// TTL is how long a result is kept, from its Create; at most MaxTTL;
	// default 1 hour.
	TTL time.Duration
}

// withDefaults is l with its zero fields set to their defaults, or an
// error naming each field out of bounds.
func (l Limits) withDefaults() (Limits, error) {
	l.Chunk = orDefault(l.Chunk, DefaultChunk)
	l.MaxResult = orDefault(l.MaxResult, DefaultMaxResult)
	l.PerOwner = orDefault(l.PerOwner, DefaultPerOwner)
	l.PerOwnerCount = orDefault(l.PerOwnerCount, DefaultPerOwnerCount)
	l.Total = orDefault(l.Total, DefaultTotal)
	l.TotalCount = orDefault(l.TotalCount, DefaultTotalCount)
	l.TTL = orDefault(l.TTL, DefaultTTL)
	var errs []error
	if l.Chunk < MinChunk || l.Chunk > MaxChunk {
		errs = append(errs, fmt.Errorf("chunk %d: must be between %d and %d bytes", l.Chunk, MinChunk, MaxChunk))
	}
	if l.MaxResult < 0 || l.PerOwner < 0 || l.Total < 0 {
		errs = append(errs, fmt.Errorf("max_result %d, per_owner %d, total %d: must not be negative", l.MaxResult, l.PerOwner, l.Total))
	}
	if l.PerOwnerCount < 0 || l.TotalCount < 0 {
		errs = append(errs, fmt.Errorf("per_owner_count %d, total_count %d: must not be negative", l.PerOwnerCount, l.TotalCount))
	}
	if l.TTL < 0 || l.TTL > MaxTTL {
		errs = append(errs, fmt.Errorf("ttl %v: must be between 0 and %v", l.TTL, MaxTTL))
	}
	return l, errors.Join(errs...)
}

func orDefault[T int | int64 | time.Duration](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}
