package resultstore

import (
	"bytes"
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
)

// Writer writes one result: its chunks are stored as they fill, the
// result is readable once Close stored its manifest. A Writer is used by
// one goroutine at a time.
type Writer struct {
	s       *Store
	ctx     context.Context
	id      string
	owner   ownerKey
	aead    cipher.AEAD
	pending manifest
	// buf is the chunk being filled, with room for its seal; nil until
	// the first Write. ad is the additional data of the chunk sealed last.
	buf []byte
	ad  []byte
	// chunks is the chunks stored, size the bytes written.
	chunks int
	size   int64
	// err ends the Writer: the error it failed with (what it stored is
	// deleted then), errClosed or errAborted.
	err error
}

var (
	errClosed  = errors.New("resultstore: the result is closed")
	errAborted = errors.New("resultstore: the result was aborted")
)

// Create opens a Writer of a result for owner (any string: the principal
// the result is bound to), counting it against owner's and the store's
// quotas: a *QuotaError when the owner or the store is full. It stores
// the result's unfinished manifest at once (see the package's doc). The
// Writer's Writes store chunks under ctx.
func (s *Store) Create(ctx context.Context, owner string) (*Writer, error) {
	now := s.now()
	id := s.keys.newID()
	w := &Writer{s: s, ctx: ctx, id: id, owner: s.keys.ownerKey(owner)}
	w.pending = manifest{Chunk: s.lim.Chunk, Expires: now.Add(s.lim.TTL), Owner: s.keys.bind(id, owner)}
	aead, err := s.keys.resultAEAD(id)
	if err != nil {
		return nil, err
	}
	w.aead = aead
	if err := s.ledger.open(w.owner, id, now, w.pending.Expires); err != nil {
		return nil, err
	}
	if err := s.storeManifest(ctx, id, aead, w.pending); err != nil {
		s.ledger.release(w.owner, id)
		s.deleteResult(context.WithoutCancel(ctx), id, 0)
		return nil, err
	}
	return w, nil
}

// ID is the id the result is read by once closed.
func (w *Writer) ID() string { return w.id }

// MaxNote bounds a result's note, in bytes.
const MaxNote = 256

// errNoteTooLong refuses a note over MaxNote.
var errNoteTooLong = fmt.Errorf("resultstore: a note of more than %d bytes", MaxNote)

// SetNote sets what each Read of the result gives back beside its bytes
// (Page.Note), at most MaxNote bytes: what the writer wants known of the
// result when it is read, such as the trace context of the call that
// made it. It is sealed with the manifest when the Writer closes.
func (w *Writer) SetNote(note []byte) error {
	if len(note) > MaxNote {
		return errNoteTooLong
	}
	w.pending.Note = bytes.Clone(note)
	return nil
}

// Write adds p to the result, storing each chunk as it fills. Any error
// ends the Writer: what it stored is deleted, its quota given back, and
// Close returns the error. ErrTooLarge when the result would pass
// Limits.MaxResult; a *QuotaError when its owner's or the store's bytes
// would pass their bound; ErrExpired past the result's TTL; or the
// storage's error.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if int64(len(p)) > w.s.lim.MaxResult-w.size {
		return 0, w.fail(w.ctx, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, w.s.lim.MaxResult))
	}
	if err := w.s.ledger.grow(w.owner, w.id, int64(len(p)), w.s.now()); err != nil {
		return 0, w.fail(w.ctx, err)
	}
	w.size += int64(len(p))
	chunk := w.s.lim.Chunk
	for n := 0; n < len(p); {
		if w.buf == nil {
			w.buf = make([]byte, 0, chunk+w.aead.Overhead())
		}
		k := min(chunk-len(w.buf), len(p)-n)
		w.buf = append(w.buf, p[n:n+k]...)
		n += k
		if len(w.buf) == chunk {
			if err := w.storeChunk(w.ctx); err != nil {
				return n, w.fail(w.ctx, err)
			}
		}
	}
	return len(p), nil
}

// storeChunk seals the buffer in place and stores it as the next chunk.
func (w *Writer) storeChunk(ctx context.Context) error {
	w.ad = additional(w.ad, w.id, uint64(w.chunks))
	sealed := w.aead.Seal(w.buf[:0], nil, w.buf, w.ad)
	if err := w.s.storage.Store(ctx, chunkKey(w.id, w.chunks), sealed); err != nil {
		return fmt.Errorf("resultstore: storing chunk %d of a result: %w", w.chunks, err)
	}
	w.chunks++
	w.buf = w.buf[:0]
	return nil
}

// Close stores the last chunk and the manifest: only then is the result
// readable, by its id, until its TTL passes. On error the Writer ends as
// on a Write's.
func (w *Writer) Close(ctx context.Context) (id string, size int64, err error) {
	if w.err != nil {
		return "", 0, w.err
	}
	if err := w.s.ledger.closed(w.owner, w.id, w.s.now()); err != nil {
		return "", 0, w.fail(ctx, err)
	}
	if len(w.buf) > 0 {
		if err := w.storeChunk(ctx); err != nil {
			return "", 0, w.fail(ctx, err)
		}
	}
	w.buf = nil
	m := w.pending
	m.Done, m.Size = true, w.size
	if err := w.s.storeManifest(ctx, w.id, w.aead, m); err != nil {
		return "", 0, w.fail(ctx, err)
	}
	w.err = errClosed
	return w.id, w.size, nil
}

// Abort deletes what the Writer stored and gives back its quota. It does
// nothing after Close succeeded, or once the Writer failed (which aborted
// it), so that it may be deferred. What it fails to delete is left to
// Sweep, once the result expires.
func (w *Writer) Abort(ctx context.Context) {
	if w.err != nil {
		return
	}
	w.err = errAborted
	w.abort(ctx)
}

// fail ends the Writer with err, aborting it; its deletions outlive ctx.
func (w *Writer) fail(ctx context.Context, err error) error {
	w.err = err
	w.abort(context.WithoutCancel(ctx))
	return err
}

func (w *Writer) abort(ctx context.Context) {
	w.buf = nil
	w.s.ledger.release(w.owner, w.id)
	// A chunk whose Store failed may be stored in part: it is deleted too.
	w.s.deleteResult(ctx, w.id, w.chunks+1)
}

// deleteResult deletes the first chunks of result id, then its manifest
// and its directory, and stops at the first error: what is left is found
// by Sweep from the manifest, which is deleted last.
func (s *Store) deleteResult(ctx context.Context, id string, chunks int) {
	for i := chunks - 1; i >= 0; i-- {
		if s.storage.Delete(ctx, chunkKey(id, i)) != nil {
			return
		}
	}
	if s.storage.Delete(ctx, manifestKey(id)) != nil {
		return
	}
	_ = s.storage.Delete(ctx, dirKey(id))
}
