package resultstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/resultstore"
)

// testKey is the key of the tests' stores; otherKey another.
var (
	testKey  = bytes.Repeat([]byte("k"), resultstore.MinKey)
	otherKey = bytes.Repeat([]byte("o"), resultstore.MinKey)
)

// small is limits whose chunks are small, so that a result of a few of
// them costs little.
var small = resultstore.Limits{Chunk: resultstore.MinChunk}

// clock is a time the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// counting is a storage that counts the calls made of it, and fails
// those fail says to fail with errStorage.
type counting struct {
	certmagic.Storage
	calls atomic.Int64
	fail  func(method, key string) bool
}

var errStorage = errors.New("the storage failed")

func newCounting(t *testing.T) (*counting, string) {
	dir := t.TempDir()
	return &counting{Storage: &certmagic.FileStorage{Path: dir}}, dir
}

func (c *counting) call(method, key string) error {
	c.calls.Add(1)
	if c.fail != nil && c.fail(method, key) {
		return errStorage
	}
	return nil
}

func (c *counting) Store(ctx context.Context, key string, value []byte) error {
	if err := c.call("Store", key); err != nil {
		return err
	}
	return c.Storage.Store(ctx, key, value)
}

func (c *counting) Load(ctx context.Context, key string) ([]byte, error) {
	if err := c.call("Load", key); err != nil {
		return nil, err
	}
	return c.Storage.Load(ctx, key)
}

func (c *counting) Delete(ctx context.Context, key string) error {
	if err := c.call("Delete", key); err != nil {
		return err
	}
	return c.Storage.Delete(ctx, key)
}

func (c *counting) Exists(ctx context.Context, key string) bool {
	c.calls.Add(1)
	return c.Storage.Exists(ctx, key)
}

func (c *counting) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if err := c.call("List", prefix); err != nil {
		return nil, err
	}
	return c.Storage.List(ctx, prefix, recursive)
}

func (c *counting) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	if err := c.call("Stat", key); err != nil {
		return certmagic.KeyInfo{}, err
	}
	return c.Storage.Stat(ctx, key)
}

func open(t *testing.T, storage certmagic.Storage, key []byte, lim resultstore.Limits, c *clock) *resultstore.Store {
	t.Helper()
	var now func() time.Time
	if c != nil {
		now = c.Now
	}
	s, err := resultstore.Open(storage, key, lim, now)
	require.NoError(t, err)
	return s
}

// write stores data as a result of owner, in writes of step bytes.
func write(t *testing.T, s *resultstore.Store, owner string, data []byte, step int) string {
	t.Helper()
	w, err := s.Create(t.Context(), owner)
	require.NoError(t, err)
	for len(data) > 0 {
		k := min(step, len(data))
		n, err := w.Write(data[:k])
		require.NoError(t, err)
		require.Equal(t, k, n)
		data = data[k:]
	}
	id, _, err := w.Close(t.Context())
	require.NoError(t, err)
	return id
}

// readAll reads result id back in reads of step bytes.
func readAll(t *testing.T, s *resultstore.Store, id, owner string, step int) []byte {
	t.Helper()
	var out []byte
	for {
		page, err := s.Read(t.Context(), id, owner, int64(len(out)), step)
		data, size := page.Data, page.Size
		require.NoError(t, err)
		out = append(out, data...)
		if int64(len(out)) >= size {
			return out
		}
		require.NotEmpty(t, data)
	}
}

// pattern fills b with the bytes of a result at offset off: each aligned
// 8 bytes hold their offset, so that no two chunks are alike.
func pattern(b []byte, off int64) {
	const mask = 0x5a5a5a5a5a5a5a5a
	i := 0
	if off&7 == 0 {
		for ; i+8 <= len(b); i += 8 {
			binary.BigEndian.PutUint64(b[i:], uint64(off+int64(i))^mask)
		}
	}
	var word [8]byte
	for ; i < len(b); i++ {
		pos := off + int64(i)
		binary.BigEndian.PutUint64(word[:], uint64(pos&^7))
		b[i] = word[pos&7] ^ 0x5a
	}
}

func patterned(n int) []byte {
	b := make([]byte, n)
	pattern(b, 0)
	return b
}

// files is every file under root, by path relative to it.
func files(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	require.NoError(t, err)
	return out
}

// resultFiles is the files stored of result id.
func resultFiles(t *testing.T, root, id string) []string {
	t.Helper()
	var out []string
	for p := range files(t, root) {
		if path.Dir(p) == resultstore.Prefix+"/"+id {
			out = append(out, path.Base(p))
		}
	}
	return out
}
