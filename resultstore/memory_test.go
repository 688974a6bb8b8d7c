//go:build !race

// The race detector shadows every allocation and slows the write tenfold:
// the heap it measures is not the store's. This test runs without it.

package resultstore_test

import (
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/heapprobe"
	"github.com/caddymcp/caddy-mcp/resultstore"
)

// hugeResult is the bytes of the result written.
const hugeResult = 200_000_000

// heapSlack is what the heap may grow by during the write beyond the
// Writer's buffer, which is one chunk and its seal's 28 bytes (2 × Chunk
// is allowed it): what each stored chunk leaves to the collector (its
// key, the file storage's temporary file, its name and its directory's
// check: about 1.5 KiB a chunk, 0.3 MiB for the 191 chunks of 1 MiB
// here, fewer than the collector lets pile up before it runs) and the few
// objects the write makes once (the Writer, its cipher, the manifests). A
// second buffer held, let alone the result, would pass it.
const heapSlack = 512 << 10

// Memory follows the buffer, not the result: writing 200 MB through a
// Writer to a file storage grows the heap by a chunk, not by the result.
func TestWritingA200MBResultHoldsOneChunk(t *testing.T) {
	s := open(t, &certmagic.FileStorage{Path: t.TempDir()}, testKey, resultstore.Limits{}, nil)
	chunk := s.Limits().Chunk
	piece := make([]byte, 64<<10) // the test's own input, refilled
	write(t, s, "warm", piece, len(piece))

	before := heapprobe.Objects()
	stop := heapprobe.Peak()
	start, began := heapprobe.Allocated(), time.Now()
	w, err := s.Create(t.Context(), "alice")
	require.NoError(t, err)
	for off := int64(0); off < hugeResult; {
		k := min(int64(len(piece)), hugeResult-off)
		pattern(piece[:k], off)
		if _, err := w.Write(piece[:k]); err != nil {
			t.Fatal(err)
		}
		off += k
	}
	id, size, err := w.Close(t.Context())
	peak, allocated, took := stop(), heapprobe.Allocated()-start, time.Since(began)
	require.NoError(t, err)
	require.Equal(t, int64(hugeResult), size)

	growth := int64(peak) - int64(before)
	t.Logf("%d bytes in chunks of %d: the heap grew by %d bytes (%.2f MiB) at most; %d bytes (%.2f MiB) allocated; %v",
		size, chunk, growth, float64(growth)/(1<<20), allocated, float64(allocated)/(1<<20), took.Round(time.Millisecond))
	assert.LessOrEqual(t, growth, int64(2*chunk+heapSlack))

	for _, off := range []int64{0, int64(chunk) - 3, 100*int64(chunk) + 17, hugeResult - 5} {
		page, err := s.Read(t.Context(), id, "alice", off, 64)
		got := page.Data
		require.NoError(t, err)
		want := make([]byte, min(64, hugeResult-off))
		pattern(want, off)
		assert.Equal(t, want, got, "off %d", off)
	}
}
