package resultstore_test

import (
	"crypto/rand"
	"encoding/base64"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/resultstore"
)

// A result read back in pieces, at any offsets, is the result: pieces
// within a chunk, across one or two boundaries, in the last partial
// chunk, at its end and past it.
func TestAResultReadsBackInPieces(t *testing.T) {
	s := open(t, &certmagic.FileStorage{Path: t.TempDir()}, testKey, small, nil)
	const chunk = resultstore.MinChunk
	data := make([]byte, 5*chunk+1234)
	rand.Read(data)
	id := write(t, s, "alice", data, 1000)
	size := int64(len(data))

	cases := []struct {
		off int64
		n   int
	}{
		{0, 1}, {0, chunk}, {0, 2 * chunk}, {chunk - 1, 2}, {chunk, chunk},
		{chunk - 5, 2 * chunk}, // three chunks
		{2*chunk + 7, chunk + 100}, {5 * chunk, 1234}, {5*chunk + 1000, 1000},
		{size - 1, 10}, {size, 10}, {size + 10, 10}, {3, 0},
	}
	for _, c := range cases {
		page, err := s.Read(t.Context(), id, "alice", c.off, c.n)
		require.NoError(t, err, "off %d n %d", c.off, c.n)
		assert.Equal(t, size, page.Size)
		from, to := min(c.off, size), min(c.off+int64(c.n), size)
		assert.Equal(t, data[from:to], page.Data, "off %d n %d", c.off, c.n)
	}

	// Random pieces, end to end.
	r := mrand.New(mrand.NewPCG(1, 2))
	var back []byte
	for int64(len(back)) < size {
		page, err := s.Read(t.Context(), id, "alice", int64(len(back)), 1+r.IntN(3*chunk))
		require.NoError(t, err)
		back = append(back, page.Data...)
	}
	assert.Equal(t, data, back)
	assert.Equal(t, data, readAll(t, s, id, "alice", 2*chunk))
}

// A Read gives at most MaxRead bytes; a negative range is an error that
// is not ErrNotFound; an empty result reads as empty.
func TestAReadIsBounded(t *testing.T) {
	s := open(t, &certmagic.FileStorage{Path: t.TempDir()}, testKey, small, nil)
	assert.Equal(t, 2*resultstore.MinChunk, s.MaxRead())
	data := patterned(5 * resultstore.MinChunk)
	id := write(t, s, "alice", data, len(data))
	page, err := s.Read(t.Context(), id, "alice", 100, len(data))
	require.NoError(t, err)
	assert.Equal(t, data[100:100+s.MaxRead()], page.Data)

	for _, r := range [][2]int64{{-1, 1}, {0, -1}} {
		_, err := s.Read(t.Context(), id, "alice", r[0], int(r[1]))
		require.Error(t, err)
		assert.NotErrorIs(t, err, resultstore.ErrNotFound)
	}

	empty := write(t, s, "alice", nil, 1)
	page, err = s.Read(t.Context(), empty, "alice", 0, 10)
	require.NoError(t, err)
	assert.Zero(t, page.Size)
	assert.Empty(t, page.Data)
}

// A made-up id, malformed or altered, is refused with ErrNotFound before
// any storage is read.
func TestAMadeUpIDReadsNoStorage(t *testing.T) {
	storage, _ := newCounting(t)
	s := open(t, storage, testKey, small, nil)
	id := write(t, s, "alice", patterned(100), 100)
	_, err := s.Read(t.Context(), id, "alice", 0, 10)
	require.NoError(t, err)

	raw, err := base64.RawURLEncoding.DecodeString(id)
	require.NoError(t, err)
	random := make([]byte, len(raw))
	rand.Read(random)
	flipped := []byte(id)
	flipped[3] ^= 'A' ^ 'B'
	// The last character carries 2 bits no byte has: set one, and the id
	// decodes to the same bytes under a lax decoder.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	lastBits := id[:len(id)-1] + string(alphabet[strings.IndexByte(alphabet, id[len(id)-1])+1])
	lax, err := base64.RawURLEncoding.DecodeString(lastBits)
	require.NoError(t, err)
	require.Equal(t, raw, lax)
	otherStore := open(t, &certmagic.FileStorage{Path: t.TempDir()}, otherKey, small, nil)
	otherID := write(t, otherStore, "alice", []byte("x"), 1)

	madeUp := []string{
		"", "x", id[:len(id)-1], id + "A", strings.Repeat("A", len(id)),
		base64.RawURLEncoding.EncodeToString(random), string(flipped), lastBits,
		"../../" + id[6:], strings.ToUpper(id), otherID,
	}
	before := storage.calls.Load()
	for _, m := range madeUp {
		if m == id {
			continue
		}
		_, err := s.Read(t.Context(), m, "alice", 0, 10)
		assert.Equal(t, resultstore.ErrNotFound, err, "%q", m)
	}
	assert.Equal(t, before, storage.calls.Load(), "no storage call")
}

// Only a result's owner reads it, once it is closed, until it is
// aborted: everyone else, and before or after, gets the one ErrNotFound.
func TestOnlyItsOwnerReadsAResult(t *testing.T) {
	s := open(t, &certmagic.FileStorage{Path: t.TempDir()}, testKey, small, nil)
	id := write(t, s, "alice", patterned(3*resultstore.MinChunk), 4096)

	for _, owner := range []string{"bob", "", "alice ", "Alice", "alicealice"} {
		_, err := s.Read(t.Context(), id, owner, 0, 10)
		assert.Equal(t, resultstore.ErrNotFound, err, "%q", owner)
	}

	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	_, err = w.Write(patterned(3 * resultstore.MinChunk))
	require.NoError(t, err)
	_, err = s.Read(t.Context(), w.ID(), "alice", 0, 10)
	assert.Equal(t, resultstore.ErrNotFound, err, "still being written")
	w.Abort(t.Context())
	_, err = s.Read(t.Context(), w.ID(), "alice", 0, 10)
	assert.Equal(t, resultstore.ErrNotFound, err, "aborted")

	_, err = s.Read(t.Context(), id, "alice", 0, 10)
	assert.NoError(t, err)
}

// A result's note is sealed with its manifest and given back with each
// page, to its owner only; a note over MaxNote is refused, and a result
// without one reads a nil note.
func TestANoteIsGivenBackWithEveryPage(t *testing.T) {
	root := t.TempDir()
	s := open(t, &certmagic.FileStorage{Path: root}, testKey, small, nil)
	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	require.ErrorContains(t, w.SetNote(make([]byte, resultstore.MaxNote+1)), "note")
	note := []byte("traceparent 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	require.NoError(t, w.SetNote(note))
	data := patterned(3 * resultstore.MinChunk)
	_, err = w.Write(data)
	require.NoError(t, err)
	id, _, err := w.Close(t.Context())
	require.NoError(t, err)
	for _, off := range []int64{0, resultstore.MinChunk + 5, int64(len(data))} {
		page, err := s.Read(t.Context(), id, "alice", off, 100)
		require.NoError(t, err)
		assert.Equal(t, note, page.Note, "from %d", off)
	}
	for _, f := range files(t, root) {
		assert.NotContains(t, string(f), "0af7651916cd43dd", "the note is stored sealed")
	}
	_, err = s.Read(t.Context(), id, "bob", 0, 100)
	require.ErrorIs(t, err, resultstore.ErrNotFound)

	page, err := s.Read(t.Context(), write(t, s, "alice", data, len(data)), "alice", 0, 1)
	require.NoError(t, err)
	assert.Nil(t, page.Note)
}

// A chunk opened is kept for the pages that follow (reading a result page
// by page loads each chunk once), and never lets a read past what the
// manifest allows: another owner, an expired or a deleted result.
func TestChunksOpenedAreKeptButTheManifestDecides(t *testing.T) {
	storage, _ := newCounting(t)
	c := newClock()
	s := open(t, storage, testKey, small, c)
	const chunk = resultstore.MinChunk
	data := patterned(4 * chunk)
	id := write(t, s, "alice", data, len(data))
	before := storage.calls.Load()
	for off := int64(0); off < int64(len(data)); off += 512 {
		page, err := s.Read(t.Context(), id, "alice", off, 512)
		require.NoError(t, err)
		require.Equal(t, data[off:off+512], page.Data)
	}
	pages := int64(len(data) / 512)
	assert.Equal(t, pages+4, storage.calls.Load()-before, "a manifest per page, and each of the 4 chunks once")

	_, err := s.Read(t.Context(), id, "bob", 0, 10)
	assert.ErrorIs(t, err, resultstore.ErrNotFound, "another owner")
	c.Advance(2 * time.Hour)
	_, err = s.Read(t.Context(), id, "alice", 0, 10)
	assert.ErrorIs(t, err, resultstore.ErrNotFound, "expired")
}
