package resultstore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/resultstore"
)

// Whoever reads the storage reads neither a result nor its owner: not in
// a chunk, not in a manifest, not in a key.
func TestTheStorageHoldsNoResultNorOwner(t *testing.T) {
	root := t.TempDir()
	s := open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil)
	const owner = "alice@example.com"
	secret := []byte(strings.Repeat("the launch code is 0000; ", 1000))
	id := write(t, s, owner, secret, 3000)
	empty := write(t, s, owner, nil, 1)

	stored := files(t, root)
	require.Len(t, stored, 2+(len(secret)+resultstore.MinChunk-1)/resultstore.MinChunk, "two manifests and the chunks")
	for p, b := range stored {
		assert.True(t, strings.HasPrefix(p, resultstore.Prefix+"/"+id+"/") || strings.HasPrefix(p, resultstore.Prefix+"/"+empty+"/"), p)
		for _, needle := range []string{"launch code", owner, "alice", `"size"`, `"owner"`} {
			assert.False(t, bytes.Contains(b, []byte(needle)), "%s holds %q", p, needle)
			assert.NotContains(t, p, needle)
		}
	}
	assert.Equal(t, secret, readAll(t, s, id, owner, s.MaxRead()))
}

// A chunk opens only where it was stored: swapped with another of its
// result, or moved from another result, it is refused (ErrCorrupt); a
// manifest moved from another result does not open (ErrNotFound).
func TestChunksCannotBeSwappedOrMoved(t *testing.T) {
	root := t.TempDir()
	s := open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil)
	a := write(t, s, "alice", patterned(3*resultstore.MinChunk), 4096)
	b := write(t, s, "alice", patterned(3*resultstore.MinChunk), 4096)
	file := func(id, key string) string { return filepath.Join(root, resultstore.Prefix, id, key) }
	swap := func(x, y string) {
		bx, err := os.ReadFile(x)
		require.NoError(t, err)
		by, err := os.ReadFile(y)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(x, by, 0o600))
		require.NoError(t, os.WriteFile(y, bx, 0o600))
	}
	// Each read is a new node's, which has opened no chunk yet: a store
	// keeps the chunks it opened last (those it read before the storage
	// was altered).
	fresh := func() *resultstore.Store { return open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil) }

	// a's chunks 0 and 1 swapped: both refused, chunk 2 still read.
	swap(file(a, "0"), file(a, "1"))
	for _, off := range []int64{0, resultstore.MinChunk} {
		_, err := fresh().Read(t.Context(), a, "alice", off, 10)
		assert.ErrorIs(t, err, resultstore.ErrCorrupt, "off %d", off)
	}
	_, err := fresh().Read(t.Context(), a, "alice", 2*resultstore.MinChunk, 10)
	assert.NoError(t, err)
	swap(file(a, "0"), file(a, "1"))

	// b's chunk 2 in a's place (the same bytes once opened).
	swap(file(a, "2"), file(b, "2"))
	_, err = fresh().Read(t.Context(), a, "alice", 2*resultstore.MinChunk, 10)
	assert.ErrorIs(t, err, resultstore.ErrCorrupt)
	swap(file(a, "2"), file(b, "2"))

	// b's manifest in a's place.
	swap(file(a, "manifest"), file(b, "manifest"))
	_, err = fresh().Read(t.Context(), a, "alice", 0, 10)
	assert.Equal(t, resultstore.ErrNotFound, err)
	swap(file(a, "manifest"), file(b, "manifest"))

	// A chunk gone (a node whose clock is ahead swept it) is no result.
	require.NoError(t, os.Remove(file(a, "1")))
	_, err = fresh().Read(t.Context(), a, "alice", resultstore.MinChunk, 10)
	assert.Equal(t, resultstore.ErrNotFound, err)
	assert.Equal(t, patterned(3*resultstore.MinChunk), readAll(t, fresh(), b, "alice", 5000))
}

// Two nodes sharing a storage and a key share their results, whatever
// their chunk sizes; a node with another key reads none of them.
func TestNodesSharingStorageShareResults(t *testing.T) {
	root := t.TempDir()
	a := open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil)
	b := open(t, &certmagic.FileStorage{Path: root}, testKey, resultstore.Limits{Chunk: 3 * resultstore.MinChunk}, nil)
	other := open(t, &certmagic.FileStorage{Path: root}, otherKey, small, nil)

	data := patterned(10*resultstore.MinChunk + 17)
	fromA := write(t, a, "alice", data, 7000)
	fromB := write(t, b, "alice", data, 7000)
	for _, id := range []string{fromA, fromB} {
		assert.Equal(t, data, readAll(t, a, id, "alice", 5000))
		assert.Equal(t, data, readAll(t, b, id, "alice", 5000))
		_, err := other.Read(t.Context(), id, "alice", 0, 10)
		assert.Equal(t, resultstore.ErrNotFound, err)
	}
}

// An error of the storage reaches the caller wrapped, and says nothing
// of the result.
func TestStorageErrorsAreWrappedWithoutTheResult(t *testing.T) {
	storage, _ := newCounting(t)
	s := open(t, storage, testKey, small, nil)
	secret := []byte(strings.Repeat("secret words ", 1000))
	id := write(t, s, "alice", secret, 5000)

	storage.fail = func(method, key string) bool { return method == "Load" && strings.HasSuffix(key, "/1") }
	_, err := s.Read(t.Context(), id, "alice", resultstore.MinChunk-3, 10)
	require.ErrorIs(t, err, errStorage)
	assert.NotContains(t, err.Error(), "secret")

	storage.fail = func(method, key string) bool { return method == "Store" && strings.HasSuffix(key, "/2") }
	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	_, err = w.Write(secret)
	require.ErrorIs(t, err, errStorage)
	assert.NotContains(t, err.Error(), "secret")
	_, _, cerr := w.Close(t.Context())
	assert.Equal(t, err, cerr, "the Writer ended with its error")

	storage.fail = func(method, key string) bool { return method == "Store" }
	_, err = s.Create(t.Context(), "alice")
	require.ErrorIs(t, err, errStorage)
	assert.Equal(t, 1, s.Status().Results, "what failed gave its quota back")
}
