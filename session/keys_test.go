package session

import (
	"context"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// node is a keeper on shared storage, on a clock the test moves, and the
// ttl of the tokens it opens.
type node struct {
	*Keeper
	clock *time.Time
	ttl   time.Duration
}

func newNode(t *testing.T, storage certmagic.Storage, clock *time.Time, ttl time.Duration) node {
	t.Helper()
	k := &Keeper{storage: storage, now: func() time.Time { return *clock }, logger: zap.NewNop()}
	require.NoError(t, k.refresh(context.Background()))
	return node{k, clock, ttl}
}

func (n node) seal(t *testing.T) string {
	t.Helper()
	tok, err := n.Ring().Seal(Session{Upstream: "u:1", ID: "s", Issued: *n.clock}, nil)
	require.NoError(t, err)
	return tok
}

func (n node) opens(tok string) bool {
	_, err := n.Ring().Open(tok, *n.clock, n.ttl, nil)
	return err == nil
}

func TestNodesSharingStorageShareKeys(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	clock := t0
	a := newNode(t, storage, &clock, 24*time.Hour)
	b := newNode(t, storage, &clock, 24*time.Hour)
	assert.Equal(t, a.Ring().SealingID(), b.Ring().SealingID(), "the second node found the first's key")
	assert.True(t, b.opens(a.seal(t)))
	assert.True(t, a.opens(b.seal(t)))

	other := newNode(t, &certmagic.FileStorage{Path: t.TempDir()}, &clock, 24*time.Hour)
	assert.False(t, other.opens(a.seal(t)), "storage not shared: keys not shared")
}

// Over three days of rotations, every token opens on every node for its
// whole ttl, though the nodes' ttls differ and one node's clock is behind.
func TestRotationNeverBreaksALiveToken(t *testing.T) {
	const ttl = 24 * time.Hour
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	clockA, clockB := t0, t0
	a := newNode(t, storage, &clockA, ttl)
	b := newNode(t, storage, &clockB, ttl)
	short := newNode(t, storage, &clockA, time.Hour) // another site's handler

	type issued struct {
		tok string
		at  time.Time
	}
	var live []issued
	sealers := map[string]bool{}
	for step := time.Duration(0); step < 72*time.Hour; step += 20 * time.Minute {
		// b's clock is 3 minutes behind a's.
		clockA, clockB = t0.Add(step), t0.Add(step-3*time.Minute)
		require.NoError(t, a.refresh(context.Background()))
		require.NoError(t, short.refresh(context.Background()))
		require.NoError(t, b.refresh(context.Background()))
		sealers[a.Ring().SealingID()] = true
		live = append(live, issued{a.seal(t), clockA}, issued{b.seal(t), clockB})
		kept := live[:0]
		for _, x := range live {
			if clockB.Sub(x.at) >= ttl-3*time.Minute {
				continue
			}
			require.True(t, a.opens(x.tok) && b.opens(x.tok), "a token sealed at %s fails at %s", x.at, clockA)
			kept = append(kept, x)
		}
		live = kept
		assert.LessOrEqual(t, a.Ring().Len(), int(MaxTTL/rotateEvery)+3, "keys held at %s", clockA)
	}
	assert.GreaterOrEqual(t, len(sealers), 6, "a new key seals every 12 hours")
}

func TestKeysAreDroppedOnceNoTokenTheySealedOpens(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	clock := t0
	n := newNode(t, storage, &clock, MaxTTL)
	tok := n.seal(t)
	first := n.Ring().SealingID()
	clock = t0.Add(rotateEvery)
	require.NoError(t, n.refresh(context.Background()))
	assert.Equal(t, first, n.Ring().SealingID(), "the next key is announced before it seals")
	assert.Equal(t, 2, n.Ring().Len())
	clock = clock.Add(announceAhead)
	require.NoError(t, n.refresh(context.Background()))
	assert.NotEqual(t, first, n.Ring().SealingID(), "then it seals")
	successor := clock

	for clock.Sub(successor) < keepAfter {
		assert.True(t, n.opens(tok) || clock.Sub(t0) > MaxTTL, "at %s", clock)
		require.NoError(t, n.refresh(context.Background()))
		clock = clock.Add(6 * time.Hour)
	}
	clock = successor.Add(keepAfter + time.Second)
	require.NoError(t, n.refresh(context.Background()))
	_, err := n.Ring().Open(tok, clock, 100*MaxTTL, nil)
	assert.ErrorIs(t, err, ErrMalformed, "the first key is gone")
	assert.LessOrEqual(t, n.Ring().Len(), int(MaxTTL/rotateEvery)+3)
}

// A node whose clock is behind the one that wrote the first key still
// starts, sealing with the oldest key.
func TestANodeBehindTheFirstKeyStarts(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	ahead, behind := t0.Add(500*time.Millisecond), t0.Add(-90*time.Second)
	a := newNode(t, storage, &ahead, time.Hour)
	b := newNode(t, storage, &behind, time.Hour)
	assert.Equal(t, a.Ring().SealingID(), b.Ring().SealingID())
}

func TestUnreadableKeysFailTheConfig(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	require.NoError(t, storage.Store(context.Background(), storageKey, []byte("{not json")))
	_, err := NewKeeper(context.Background(), storage, zap.NewNop())
	assert.ErrorContains(t, err, "do not parse")
}

// memoryStorage is Caddy's storage in memory, whose Load panics once told
// to, as a storage module's bug would; it counts the loads.
type memoryStorage struct {
	mu        sync.Mutex
	values    map[string][]byte
	panicking atomic.Bool
	loads     atomic.Int32
}

func (m *memoryStorage) Lock(context.Context, string) error   { return nil }
func (m *memoryStorage) Unlock(context.Context, string) error { return nil }

func (m *memoryStorage) Store(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[key] = value
	return nil
}

func (m *memoryStorage) Load(_ context.Context, key string) ([]byte, error) {
	m.loads.Add(1)
	if m.panicking.Load() {
		panic("the storage panics")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.values[key]; ok {
		return v, nil
	}
	return nil, fs.ErrNotExist
}

func (m *memoryStorage) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.values, key)
	return nil
}

func (m *memoryStorage) Exists(_ context.Context, key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.values[key]
	return ok
}

func (m *memoryStorage) List(context.Context, string, bool) ([]string, error) { return nil, nil }
func (m *memoryStorage) Stat(context.Context, string) (certmagic.KeyInfo, error) {
	return certmagic.KeyInfo{}, nil
}

// A refresh of the keys that panics (the storage's code runs under it) is
// a failed one: logged, the keys held go on working, and the keeper
// refreshes again at its next tick.
func TestAKeeperWhoseStoragePanicsKeepsItsKeysAndGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		storage := &memoryStorage{values: map[string][]byte{}}
		core, logs := observer.New(zapcore.DebugLevel)
		ctx, stop := context.WithCancel(t.Context())
		k, err := NewKeeper(ctx, storage, zap.New(core))
		require.NoError(t, err)
		ring := k.Ring()

		storage.panicking.Store(true)
		synctest.Wait()
		loads := storage.loads.Load()
		for range 2 {
			time.Sleep(refreshEvery)
			synctest.Wait()
		}
		assert.Equal(t, loads+2, storage.loads.Load(), "the keeper tried at each tick")
		lines := logs.FilterField(zap.String("site", siteKeys)).All()
		require.Len(t, lines, 2)
		assert.Equal(t, "recovered a panic", lines[0].Message)
		assert.Contains(t, lines[0].ContextMap()["stack"], "session.(*memoryStorage).Load")
		assert.Same(t, ring, k.Ring(), "the keys held go on working")

		storage.panicking.Store(false)
		time.Sleep(refreshEvery)
		synctest.Wait()
		assert.NotNil(t, k.Ring())
		stop()
	})
}
