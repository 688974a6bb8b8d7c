package resultstore_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/resultstore"
)

// sweepAll sweeps with max calls each until a pass deletes nothing (at
// most rounds calls), checking that no call makes more than max storage
// calls; it returns the results deleted.
func sweepAll(t *testing.T, s *resultstore.Store, storage *counting, max, rounds int) int {
	t.Helper()
	total, pass := 0, 0
	for range rounds {
		before := storage.calls.Load()
		n, err := s.Sweep(t.Context(), max)
		require.NoError(t, err)
		calls := storage.calls.Load() - before
		require.LessOrEqual(t, calls, int64(max), "one sweep's storage calls")
		total, pass = total+n, pass+n
		if calls < int64(max) { // the call ran out of work: the pass ended
			if pass == 0 {
				return total
			}
			pass = 0
		}
	}
	t.Fatalf("%d sweeps of %d calls did not finish", rounds, max)
	return 0
}

// Sweep deletes the expired results, finished or not, within its bound of
// storage calls per call, and only them.
func TestSweepDeletesWhatExpiredWithinItsBound(t *testing.T) {
	c := newClock()
	storage, root := newCounting(t)
	lim := resultstore.Limits{Chunk: resultstore.MinChunk, TTL: time.Hour}
	s := open(t, storage, testKey, lim, c)
	other := open(t, storage, testKey, lim, c) // another node

	var old []string
	for i := range 4 {
		old = append(old, write(t, s, "alice", patterned(3*resultstore.MinChunk+i), 5000))
	}
	old = append(old, write(t, other, "bob", patterned(10), 10))
	abandoned, err := s.Create(t.Context(), "carol") // never closed
	require.NoError(t, err)
	_, err = abandoned.Write(patterned(2 * resultstore.MinChunk))
	require.NoError(t, err)
	c.Advance(30 * time.Minute)
	fresh := write(t, s, "alice", patterned(5000), 5000)

	assert.Zero(t, sweepAll(t, s, storage, 3, 50), "nothing expired yet")
	c.Advance(30 * time.Minute)
	for _, id := range old {
		_, err := s.Read(t.Context(), id, "alice", 0, 1)
		assert.Equal(t, resultstore.ErrNotFound, err, "expired, not yet deleted")
	}
	assert.Zero(t, sweepAll(t, s, storage, 3, 50), "expired less than a minute ago")

	c.Advance(time.Minute + time.Second)
	assert.Equal(t, 6, sweepAll(t, s, storage, 3, 100))
	left := files(t, root)
	for p := range left {
		assert.True(t, strings.HasPrefix(p, resultstore.Prefix+"/"+fresh+"/"), "left %s", p)
	}
	assert.Len(t, left, 3)
	dirs, err := os.ReadDir(filepath.Join(root, resultstore.Prefix))
	require.NoError(t, err)
	assert.Len(t, dirs, 1, "the directories of the deleted results are gone")
	assert.Equal(t, patterned(5000), readAll(t, s, fresh, "alice", 5000))

	st := s.Status()
	assert.Equal(t, 1, st.Results)
	assert.Equal(t, c.Now(), st.LastSweep)
	assert.Empty(t, st.LastSweepError)
}

// A sweep cut short by the storage goes on where it stopped; what an
// interrupted deletion left (a directory emptied, a result without its
// manifest) and what no key of the store opens are deleted once they are
// old enough.
func TestSweepFinishesWhatOthersLeft(t *testing.T) {
	c := newClock()
	storage, root := newCounting(t)
	lim := resultstore.Limits{Chunk: resultstore.MinChunk, TTL: time.Hour}
	s := open(t, storage, testKey, lim, c)
	rotated := open(t, storage, otherKey, lim, c) // the key before a change
	write(t, rotated, "alice", patterned(3*resultstore.MinChunk), 5000)
	expiring := []string{
		write(t, s, "alice", patterned(3*resultstore.MinChunk), 5000),
		write(t, s, "alice", patterned(3*resultstore.MinChunk), 5000),
	}
	orphan := write(t, s, "alice", patterned(3*resultstore.MinChunk), 5000)
	require.NoError(t, os.Remove(filepath.Join(root, resultstore.Prefix, orphan, "manifest")))
	require.NoError(t, os.MkdirAll(filepath.Join(root, resultstore.Prefix, "emptied"), 0o700))

	c.Advance(time.Hour + 2*time.Minute)
	storage.fail = func(method, key string) bool { return method == "Delete" && strings.HasSuffix(key, "/1") }
	_, err := s.Sweep(t.Context(), 1000)
	require.ErrorIs(t, err, errStorage)
	assert.Contains(t, s.Status().LastSweepError, errStorage.Error())
	storage.fail = nil
	assert.Equal(t, 2, sweepAll(t, s, storage, 4, 100), "the expired ones (the empty directory is no result)")
	for _, id := range expiring {
		assert.Empty(t, resultFiles(t, root, id))
	}
	assert.Len(t, dirs(t, root), 2, "the one no key opens and the orphan are young yet")

	// Their files' storage time is the wall clock's.
	c.Advance(resultstore.MaxTTL)
	assert.Equal(t, 2, sweepAll(t, s, storage, 4, 100))
	assert.Empty(t, dirs(t, root))
}

func dirs(t *testing.T, root string) []os.DirEntry {
	t.Helper()
	d, err := os.ReadDir(filepath.Join(root, resultstore.Prefix))
	require.NoError(t, err)
	return d
}

// Writers, readers and a sweeper at once, on two nodes sharing storage.
func TestStoresAreSafeForConcurrentUse(t *testing.T) {
	root := t.TempDir()
	a := open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil)
	b := open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			owner := string(rune('a' + i))
			data := patterned(2*resultstore.MinChunk + i)
			for range 5 {
				id := write(t, a, owner, data, 3000)
				assert.Equal(t, data, readAll(t, b, id, owner, 5000))
				_ = a.Status()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_, err := b.Sweep(t.Context(), 10)
			assert.NoError(t, err)
		}
	})
	wg.Wait()
	assert.Equal(t, 20, a.Status().Results)
}
