package session

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// node is a keeper on shared storage, on a clock the test moves.
type node struct {
	*Keeper
	clock *time.Time
}

func newNode(t *testing.T, storage certmagic.Storage, clock *time.Time, ttl time.Duration) node {
	t.Helper()
	k := &Keeper{storage: storage, ttl: ttl, now: func() time.Time { return *clock }, logger: zap.NewNop()}
	require.NoError(t, k.refresh(context.Background()))
	return node{k, clock}
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

// Over three days of rotations, refreshing every minute as the keepers do,
// every token opens on every node for its whole ttl, and the keys held stay
// few.
func TestRotationNeverBreaksALiveToken(t *testing.T) {
	const ttl = 24 * time.Hour
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	clockA, clockB := t0, t0
	a := newNode(t, storage, &clockA, ttl)
	b := newNode(t, storage, &clockB, ttl)

	type issued struct {
		tok string
		at  time.Time
	}
	var live []issued
	sealers := map[string]bool{}
	for step := time.Duration(0); step < 72*time.Hour; step += 20 * time.Minute {
		// b's refreshes run 30 s behind a's.
		clockA, clockB = t0.Add(step), t0.Add(step+30*time.Second)
		require.NoError(t, a.refresh(context.Background()))
		require.NoError(t, b.refresh(context.Background()))
		sealers[a.Ring().SealingID()] = true
		live = append(live, issued{a.seal(t), clockA}, issued{b.seal(t), clockB})
		kept := live[:0]
		for _, x := range live {
			if clockB.Sub(x.at) >= ttl {
				continue
			}
			require.True(t, a.opens(x.tok) && b.opens(x.tok), "a token sealed at %s fails at %s", x.at, clockA)
			kept = append(kept, x)
		}
		live = kept
		assert.LessOrEqual(t, a.Ring().Len(), 4, "keys held at %s", clockA)
	}
	assert.GreaterOrEqual(t, len(sealers), 6, "a new key seals every 12 hours")
}

func TestExpiredKeysAreDropped(t *testing.T) {
	const ttl = time.Hour
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	clock := t0
	n := newNode(t, storage, &clock, ttl)
	tok := n.seal(t)
	first := n.Ring().SealingID()
	clock = t0.Add(rotateEvery)
	require.NoError(t, n.refresh(context.Background()))
	assert.Equal(t, first, n.Ring().SealingID(), "the next key is announced before it seals")
	assert.Equal(t, 2, n.Ring().Len())
	clock = clock.Add(announceAhead)
	require.NoError(t, n.refresh(context.Background()))
	assert.NotEqual(t, first, n.Ring().SealingID(), "then it seals")
	clock = clock.Add(ttl + refreshEvery + time.Second)
	require.NoError(t, n.refresh(context.Background()))
	assert.Equal(t, 1, n.Ring().Len(), "the first key's tokens have all expired")
	_, err := n.Ring().Open(tok, clock, 100*ttl, nil)
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestUnreadableKeysFailTheConfig(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	require.NoError(t, storage.Store(context.Background(), storageKey, []byte("{not json")))
	_, err := NewKeeper(context.Background(), storage, time.Hour, zap.NewNop())
	assert.ErrorContains(t, err, "do not parse")
}
