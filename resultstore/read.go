package resultstore

import (
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"errors"
	"fmt"
	"io/fs"
)

// errRange is a Read of a negative offset or length: a caller's mistake,
// not a result's absence.
var errRange = errors.New("resultstore: a negative offset or length")

// Page is what a Read gives.
type Page struct {
	// Data is the bytes read, Size the result's whole size.
	Data []byte
	Size int64
	// Note is the result's note (Writer.SetNote), nil when it has none.
	Note []byte
}

// Read is bytes [off, off+n) of result id, if owner may read it, with the
// result's whole size and note. n is cut to MaxRead and to the result's
// end: Data is shorter than n then, and empty when off >= Size. A
// negative off or n is an error. ErrNotFound for any id owner may not
// read (see ErrNotFound: an expired result is one, left to Sweep to
// delete); ErrCorrupt when a chunk does not open; or the storage's error,
// wrapped.
func (s *Store) Read(ctx context.Context, id, owner string, off int64, n int) (Page, error) {
	if off < 0 || n < 0 {
		return Page{}, errRange
	}
	if !s.keys.validID(id) {
		return Page{}, ErrNotFound
	}
	aead, err := s.keys.resultAEAD(id)
	if err != nil {
		return Page{}, err
	}
	m, err := s.readable(ctx, id, owner, aead)
	if err != nil {
		return Page{}, err
	}
	p := Page{Data: []byte{}, Size: m.Size, Note: m.Note}
	if off >= m.Size {
		return p, nil
	}
	n = int(min(int64(min(n, s.MaxRead())), m.Size-off))
	p.Data = make([]byte, 0, n)
	for len(p.Data) < n {
		pos := off + int64(len(p.Data))
		index := int(pos / int64(m.Chunk))
		plain, err := s.chunk(ctx, id, aead, m, index)
		if err != nil {
			return Page{}, err
		}
		from := int(pos - int64(index)*int64(m.Chunk))
		p.Data = append(p.Data, plain[from:min(len(plain), from+n-len(p.Data))]...)
	}
	return p, nil
}

// readable is the manifest of result id if owner may read it now:
// finished, bound to owner, not expired; ErrNotFound otherwise.
func (s *Store) readable(ctx context.Context, id, owner string, aead cipher.AEAD) (*manifest, error) {
	m, err := s.loadManifest(ctx, id, aead)
	if errors.Is(err, errUnopened) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	bound := hmac.Equal(m.Owner, s.keys.bind(id, owner))
	if !bound || !m.Done || expired(s.now(), m.Expires) {
		return nil, ErrNotFound
	}
	return m, nil
}

// chunk is chunk index of the result m describes, opened: one of the
// chunks opened last (chunks.go), or loaded and opened.
func (s *Store) chunk(ctx context.Context, id string, aead cipher.AEAD, m *manifest, index int) ([]byte, error) {
	if plain := s.chunks.get(id, index); plain != nil {
		return plain, nil
	}
	plain, err := s.loadChunk(ctx, id, aead, m, index)
	if err != nil {
		return nil, err
	}
	s.chunks.put(id, index, plain)
	return plain, nil
}

// loadChunk loads chunk index of the result m describes and opens it:
// ErrNotFound when it is gone (swept by a node whose clock is ahead),
// ErrCorrupt when it does not open or is not of its length.
func (s *Store) loadChunk(ctx context.Context, id string, aead cipher.AEAD, m *manifest, index int) ([]byte, error) {
	b, err := s.storage.Load(ctx, chunkKey(id, index))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("resultstore: loading chunk %d of a result: %w", index, err)
	}
	// Opened into a buffer of its own, not in place: a storage may hand
	// out what it holds.
	plain, err := aead.Open(nil, nil, b, additional(nil, id, uint64(index)))
	if err != nil {
		return nil, fmt.Errorf("%w: chunk %d", ErrCorrupt, index)
	}
	if len(plain) != m.chunkLen(index) {
		return nil, fmt.Errorf("%w: chunk %d is %d bytes, want %d", ErrCorrupt, index, len(plain), m.chunkLen(index))
	}
	return plain, nil
}
