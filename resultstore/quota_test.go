package resultstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/resultstore"
)

func quotaWhy(t *testing.T, err error) string {
	t.Helper()
	var q *resultstore.QuotaError
	require.ErrorAs(t, err, &q)
	return q.Why
}

// One owner flooding the store is refused once it keeps PerOwnerCount
// results, or PerOwner bytes; another owner still writes.
func TestAFloodingOwnerIsBoundedAlone(t *testing.T) {
	root := t.TempDir()
	lim := resultstore.Limits{Chunk: resultstore.MinChunk, PerOwnerCount: 4, PerOwner: 10 * resultstore.MinChunk}
	s := open(t, &certmagic.FileStorage{Path: root}, testKey, lim, nil)
	one := patterned(1000)

	for range 4 {
		write(t, s, "mallory", one, len(one))
	}
	_, err := s.Create(t.Context(), "mallory")
	assert.Equal(t, resultstore.WhyPerOwnerCount, quotaWhy(t, err))
	alice := write(t, s, "alice", one, len(one))
	assert.Equal(t, one, readAll(t, s, alice, "alice", 1000))

	// Bytes: a result that would pass PerOwner is refused as it is
	// written, and deleted.
	w, err := s.Create(t.Context(), "bob")
	require.NoError(t, err)
	chunk := patterned(resultstore.MinChunk)
	for {
		if _, err = w.Write(chunk); err != nil {
			break
		}
	}
	assert.Equal(t, resultstore.WhyPerOwnerBytes, quotaWhy(t, err))
	assert.Empty(t, resultFiles(t, root, w.ID()), "the refused result's chunks deleted")
	_, _, err = w.Close(t.Context())
	assert.Equal(t, resultstore.WhyPerOwnerBytes, quotaWhy(t, err))
	write(t, s, "bob", one, len(one)) // its quota given back

	st := s.Status()
	assert.Equal(t, resultstore.Status{Results: 6, Bytes: 6 * 1000, Owners: 3}, st)
}

// A result past MaxResult is refused with ErrTooLarge as it is written,
// its chunks deleted and its quota given back.
func TestAResultPastMaxResultIsRefusedAndDeleted(t *testing.T) {
	root := t.TempDir()
	lim := resultstore.Limits{Chunk: resultstore.MinChunk, MaxResult: 5*resultstore.MinChunk + 10}
	s := open(t, &certmagic.FileStorage{Path: root}, testKey, lim, nil)

	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	_, err = w.Write(patterned(5 * resultstore.MinChunk))
	require.NoError(t, err)
	require.Len(t, resultFiles(t, root, w.ID()), 6, "five chunks and the manifest stored as they filled")
	assert.Equal(t, int64(5*resultstore.MinChunk), s.Status().Bytes)

	n, err := w.Write(patterned(11))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, resultstore.ErrTooLarge)
	assert.Empty(t, resultFiles(t, root, w.ID()))
	assert.NoDirExists(t, root+"/"+resultstore.Prefix+"/"+w.ID())
	assert.Equal(t, resultstore.Status{}, s.Status())
	_, err = w.Write(patterned(1))
	assert.ErrorIs(t, err, resultstore.ErrTooLarge, "the Writer ended")
	w.Abort(t.Context()) // nothing more

	// Exactly MaxResult is kept.
	id := write(t, s, "alice", patterned(5*resultstore.MinChunk+10), 3000)
	page, err := s.Read(t.Context(), id, "alice", 0, 1)
	size := page.Size
	require.NoError(t, err)
	assert.Equal(t, int64(5*resultstore.MinChunk+10), size)
}

// The store's own bounds refuse every owner: Total bytes, TotalCount
// results; what expired makes room.
func TestTheStoreIsBoundedInAll(t *testing.T) {
	c := newClock()
	lim := resultstore.Limits{Chunk: resultstore.MinChunk, Total: 3000, TotalCount: 3, TTL: time.Minute}
	s := open(t, &certmagic.FileStorage{Path: t.TempDir()}, testKey, lim, c)

	write(t, s, "a", patterned(2000), 2000)
	w, err := s.Create(t.Context(), "b")
	require.NoError(t, err)
	_, err = w.Write(patterned(1001))
	assert.Equal(t, resultstore.WhyTotal, quotaWhy(t, err))

	write(t, s, "b", nil, 1)
	write(t, s, "c", nil, 1)
	_, err = s.Create(t.Context(), "d")
	assert.Equal(t, resultstore.WhyTotal, quotaWhy(t, err), "TotalCount")

	c.Advance(time.Minute)
	write(t, s, "d", patterned(3000), 3000)
	assert.Equal(t, resultstore.Status{Results: 1, Bytes: 3000, Owners: 1}, s.Status())
}

// An owner's results that expired count no more, even while it writes.
func TestWhatExpiredGivesItsQuotaBack(t *testing.T) {
	c := newClock()
	lim := resultstore.Limits{Chunk: resultstore.MinChunk, PerOwner: 3000, TTL: time.Minute}
	s := open(t, &certmagic.FileStorage{Path: t.TempDir()}, testKey, lim, c)
	write(t, s, "alice", patterned(2500), 2500)
	c.Advance(30 * time.Second)
	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	_, err = w.Write(patterned(500))
	require.NoError(t, err)
	c.Advance(30 * time.Second) // the first expired
	_, err = w.Write(patterned(2000))
	require.NoError(t, err)
	_, size, err := w.Close(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int64(2500), size)
}

// Abort deletes what was stored and gives back its quota; after Close it
// does nothing.
func TestAbortDeletesAndCloseKeeps(t *testing.T) {
	root := t.TempDir()
	s := open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil)
	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	_, err = w.Write(patterned(3*resultstore.MinChunk + 5))
	require.NoError(t, err)
	assert.Equal(t, resultstore.Status{Results: 1, Writing: 1, Bytes: 3*resultstore.MinChunk + 5, Owners: 1}, s.Status())
	w.Abort(t.Context())
	assert.Empty(t, files(t, root))
	assert.Equal(t, resultstore.Status{}, s.Status())
	_, err = w.Write([]byte("x"))
	assert.Error(t, err)
	_, _, err = w.Close(t.Context())
	assert.Error(t, err)

	w, err = s.Create(t.Context(), "alice")
	require.NoError(t, err)
	_, err = w.Write([]byte("kept"))
	require.NoError(t, err)
	id, size, err := w.Close(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int64(4), size)
	w.Abort(t.Context())
	_, err = w.Write([]byte("x"))
	assert.Error(t, err, "closed")
	assert.Equal(t, []byte("kept"), readAll(t, s, id, "alice", 10))
}

// A Writer not closed within its TTL fails with ErrExpired, and is
// deleted; a result read past its TTL is ErrNotFound.
func TestAResultExpires(t *testing.T) {
	c := newClock()
	root := t.TempDir()
	lim := resultstore.Limits{Chunk: resultstore.MinChunk, TTL: time.Hour}
	s := open(t, &certmagic.FileStorage{Path: root}, testKey, lim, c)
	id := write(t, s, "alice", patterned(10), 10)

	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	_, err = w.Write(patterned(2 * resultstore.MinChunk))
	require.NoError(t, err)
	c.Advance(time.Hour - time.Nanosecond)
	_, err = s.Read(t.Context(), id, "alice", 0, 10)
	require.NoError(t, err)

	c.Advance(time.Nanosecond)
	_, err = w.Write(patterned(1))
	assert.True(t, errors.Is(err, resultstore.ErrExpired))
	assert.Empty(t, resultFiles(t, root, w.ID()))
	_, err = s.Read(t.Context(), id, "alice", 0, 10)
	assert.Equal(t, resultstore.ErrNotFound, err)
	assert.Equal(t, resultstore.Status{}, s.Status())
}

// Open refuses a short key and limits out of bounds, and defaults the
// rest.
func TestOpenChecksItsArguments(t *testing.T) {
	fs := &certmagic.FileStorage{Path: t.TempDir()}
	_, err := resultstore.Open(fs, testKey[:31], resultstore.Limits{}, nil)
	assert.Error(t, err)
	_, err = resultstore.Open(nil, testKey, resultstore.Limits{}, nil)
	assert.Error(t, err)
	for _, lim := range []resultstore.Limits{
		{Chunk: resultstore.MinChunk - 1}, {Chunk: resultstore.MaxChunk + 1}, {MaxResult: -1},
		{PerOwnerCount: -1}, {TTL: resultstore.MaxTTL + 1}, {TTL: -1},
	} {
		_, err := resultstore.Open(fs, testKey, lim, nil)
		assert.Error(t, err, "%+v", lim)
	}
	s, err := resultstore.Open(fs, testKey, resultstore.Limits{}, nil)
	require.NoError(t, err)
	assert.Equal(t, resultstore.Limits{
		Chunk: 1 << 20, MaxResult: 256 << 20, PerOwner: 1 << 30, PerOwnerCount: 64,
		Total: 16 << 30, TotalCount: 16384, TTL: time.Hour,
	}, s.Limits())
}

// Stores opened on one ledger (a config reloaded on the same storage and
// key) count together: what an owner kept through the first counts
// against its bound in the second, until it expires.
func TestStoresOfOneLedgerCountTogether(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	c := newClock()
	ledger, err := resultstore.NewLedger(resultstore.Limits{Chunk: resultstore.MinChunk, PerOwnerCount: 2})
	require.NoError(t, err)
	first, err := resultstore.OpenShared(storage, testKey, ledger, c.Now)
	require.NoError(t, err)
	write(t, first, "alice", patterned(10), 10)
	write(t, first, "alice", patterned(10), 10)

	second, err := resultstore.OpenShared(storage, testKey, ledger, c.Now)
	require.NoError(t, err)
	_, err = second.Create(t.Context(), "alice")
	var quota *resultstore.QuotaError
	require.ErrorAs(t, err, &quota, "alice's two results still count")
	assert.Equal(t, resultstore.WhyPerOwnerCount, quota.Why)
	write(t, second, "bob", patterned(10), 10)

	apart := open(t, storage, testKey, resultstore.Limits{Chunk: resultstore.MinChunk, PerOwnerCount: 2}, c)
	write(t, apart, "alice", patterned(10), 10) // a ledger of its own counts nothing yet

	c.Advance(2 * time.Hour)
	write(t, second, "alice", patterned(10), 10)
}
