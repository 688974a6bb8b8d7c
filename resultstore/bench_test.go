package resultstore_test

import (
	"testing"

	"github.com/caddyserver/certmagic"

	"github.com/caddymcp/caddy-mcp/resultstore"
)

// BenchmarkReadPage reads a 16 MiB result (1 MiB chunks) in pages of
// 64 KiB from the file system, as a client reading on does, its bytes per
// second the text given: by one store, which keeps the chunks it opened
// last, and by a store that opened none (a node that serves this reader
// for the first time), which loads and opens the chunk of every page.
func BenchmarkReadPage(b *testing.B) {
	storage := &certmagic.FileStorage{Path: b.TempDir()}
	node := func() *resultstore.Store {
		s, err := resultstore.Open(storage, testKey, resultstore.Limits{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	s := node()
	data := patterned(16 << 20)
	w, err := s.Create(b.Context(), "alice")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		b.Fatal(err)
	}
	id, _, err := w.Close(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	const page = 64 << 10
	read := func(b *testing.B, s func() *resultstore.Store) {
		b.SetBytes(page)
		off := int64(0)
		for b.Loop() {
			if _, err := s().Read(b.Context(), id, "alice", off, page); err != nil {
				b.Fatal(err)
			}
			off = (off + page) % int64(len(data))
		}
	}
	b.Run("one node", func(b *testing.B) { read(b, func() *resultstore.Store { return s }) })
	b.Run("a new node each page", func(b *testing.B) { read(b, node) })
}
