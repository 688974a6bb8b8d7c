package resultstore

import (
	"context"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"
)

// Prefix is the storage key every result is kept under, each in a
// directory of its own named by its id.
const Prefix = "caddy-mcp/results"

func dirKey(id string) string      { return Prefix + "/" + id }
func manifestKey(id string) string { return dirKey(id) + "/manifest" }

func chunkKey(id string, index int) string {
	return dirKey(id) + "/" + strconv.Itoa(index)
}

// manifest is what a result's manifest holds, sealed: everything Read
// needs to know of a result but its bytes.
type manifest struct {
	// Done is false in the manifest a Writer stores before its first
	// chunk, so that Sweep finds an unfinished result: it is not read.
	Done bool `json:"done,omitempty"`
	// Size is the result's bytes, and Chunk the bytes of each of its
	// chunks but the last (the store that wrote it may have had another
	// Chunk than the one reading it).
	Size  int64 `json:"size"`
	Chunk int   `json:"chunk"`
	// Expires is when the result stops being read, and may be deleted.
	Expires time.Time `json:"expires"`
	// Owner binds the result to its owner (keys.bind).
	Owner []byte `json:"owner"`
	// Note is what the writer noted of the result (Writer.SetNote).
	Note []byte `json:"note,omitempty"`
}

// chunkLen is the bytes of chunk index, every chunk full but the last.
func (m *manifest) chunkLen(index int) int {
	return int(min(int64(m.Chunk), m.Size-int64(index)*int64(m.Chunk)))
}

// sane tells whether m can be read: a manifest that opens was sealed by
// this store's key, but one written by a later version must not be
// misread.
func (m *manifest) sane() bool {
	return m.Size >= 0 && m.Chunk >= MinChunk && m.Chunk <= MaxChunk && len(m.Owner) > 0 && len(m.Note) <= MaxNote
}

// storeManifest seals m under the result's cipher and stores it.
func (s *Store) storeManifest(ctx context.Context, id string, aead cipher.AEAD, m manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("resultstore: encoding a manifest: %w", err)
	}
	sealed := aead.Seal(nil, nil, b, additional(nil, id, manifestIndex))
	if err := s.storage.Store(ctx, manifestKey(id), sealed); err != nil {
		return fmt.Errorf("resultstore: storing a manifest: %w", err)
	}
	return nil
}

// errUnopened is a manifest that is stored but does not open: sealed
// under another key, or altered.
var errUnopened = errors.New("resultstore: a manifest does not open")

// loadManifest loads and opens the manifest of id: ErrNotFound when none
// is stored, errUnopened when it does not open, or the storage's error.
func (s *Store) loadManifest(ctx context.Context, id string, aead cipher.AEAD) (*manifest, error) {
	b, err := s.storage.Load(ctx, manifestKey(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("resultstore: loading a manifest: %w", err)
	}
	plain, err := aead.Open(nil, nil, b, additional(nil, id, manifestIndex))
	if err != nil {
		return nil, errUnopened
	}
	m := new(manifest)
	if err := json.Unmarshal(plain, m); err != nil || !m.sane() {
		return nil, errUnopened
	}
	return m, nil
}
