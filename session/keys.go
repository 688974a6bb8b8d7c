package session

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// MinSecret is the shortest secret FromSecrets takes, in bytes: a key is
// derived from it, and a short one is guessed.
const MinSecret = 16

// FromSecrets derives a keyring from configured secrets (HKDF-SHA256, one
// key per secret, for this purpose only): the first seals, every one
// opens, so that a secret is rotated by putting the new one first and
// keeping the old one until the sessions it sealed have expired.
func FromSecrets(secrets []string) (*Keyring, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no secret")
	}
	keys := make([]*Key, 0, len(secrets))
	for i, s := range secrets {
		if len(s) < MinSecret {
			return nil, fmt.Errorf("secret %d of %d: %d bytes, want at least %d (32 random bytes: openssl rand -base64 32)", i+1, len(secrets), len(s), MinSecret)
		}
		material, err := hkdf.Key(sha256.New, []byte(s), nil, "caddy-mcp session tokens v1", 32)
		if err != nil {
			return nil, err
		}
		k, err := newKey(material)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return NewKeyring(keys...), nil
}

// MaxTTL is the longest a token may live: keys kept in storage are kept
// that long after they stop sealing.
const MaxTTL = 30 * 24 * time.Hour

// Keys kept in Caddy's storage are rotated like TLS session ticket keys:
// a new key is written rotateEvery after the last began sealing, announced
// announceAhead before it seals, so that every node sharing the storage
// (each reads it every refreshEvery) can open its tokens before any node
// writes one. An old key is dropped once every token it sealed has
// expired, whatever ttl the handler that sealed it had (handlers and nodes
// sharing the storage may differ): MaxTTL after it stopped sealing, with a
// margin for nodes that read the keys late or whose clocks are behind.
const (
	storageKey    = "mcp/session_keys.json"
	lockName      = "mcp_session_keys"
	rotateEvery   = 12 * time.Hour
	announceAhead = 5 * time.Minute
	refreshEvery  = time.Minute
	keepAfter     = MaxTTL + announceAhead + refreshEvery
)

// keyFile is the keys as kept in storage.
type keyFile struct {
	Keys []fileKey `json:"keys"`
}

type fileKey struct {
	Secret    []byte    `json:"secret"`
	SealsFrom time.Time `json:"seals_from"`
}

// Keeper holds the keyring of keys kept in Caddy's storage, and rotates
// them: Ring is the keyring to use now.
type Keeper struct {
	storage certmagic.Storage
	now     func() time.Time
	logger  *zap.Logger
	ring    atomic.Pointer[Keyring]
	// mu makes refreshes one at a time.
	mu sync.Mutex
}

// NewKeeper reads the keys from storage, writing the first or the next
// one when it is time, and keeps them fresh until ctx is done.
func NewKeeper(ctx context.Context, storage certmagic.Storage, logger *zap.Logger) (*Keeper, error) {
	k := &Keeper{storage: storage, now: time.Now, logger: logger}
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	go k.keep(ctx)
	return k, nil
}

// Ring is the keyring to seal and open with now.
func (k *Keeper) Ring() *Keyring { return k.ring.Load() }

// siteKeys is where a panic of refreshing the keys is recovered (package
// panics).
const siteKeys = "session_keys"

// keep refreshes the keys every refreshEvery until ctx is done, on a
// goroutine of its own.
func (k *Keeper) keep(ctx context.Context) {
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.refreshNow(ctx)
	}
}

// refreshNow refreshes the keys. The keys held go on working when it
// fails, or panics (the storage's code runs under it): the next refresh
// tries again.
func (k *Keeper) refreshNow(ctx context.Context) {
	defer panics.Recover(k.logger, siteKeys)
	if err := k.refresh(ctx); err != nil && ctx.Err() == nil {
		k.logger.Warn("reading the session keys from storage failed", zap.Error(err))
	}
}

// refresh reads the keys, and when one must be added or dropped, changes
// them under the storage's lock (reading them again there: another node
// may have done it first).
func (k *Keeper) refresh(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	f, err := k.load(ctx)
	if err != nil {
		return err
	}
	if f.update(now) {
		if f, err = k.rotate(ctx, now); err != nil {
			return err
		}
	}
	ring, err := f.ring(now)
	if err != nil {
		return err
	}
	k.ring.Store(ring)
	return nil
}

func (k *Keeper) rotate(ctx context.Context, now time.Time) (*keyFile, error) {
	if err := k.storage.Lock(ctx, lockName); err != nil {
		return nil, fmt.Errorf("locking the session keys: %w", err)
	}
	defer func() {
		if err := k.storage.Unlock(context.WithoutCancel(ctx), lockName); err != nil {
			k.logger.Warn("unlocking the session keys", zap.Error(err))
		}
	}()
	f, err := k.load(ctx)
	if err != nil {
		return nil, err
	}
	if !f.update(now) {
		return f, nil // another node did it
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	if err := k.storage.Store(ctx, storageKey, b); err != nil {
		return nil, fmt.Errorf("storing the session keys: %w", err)
	}
	k.logger.Info("session keys rotated", zap.Int("keys", len(f.Keys)), zap.Time("next_seals_from", f.Keys[0].SealsFrom))
	return f, nil
}

func (k *Keeper) load(ctx context.Context) (*keyFile, error) {
	f := new(keyFile)
	b, err := k.storage.Load(ctx, storageKey)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading the session keys: %w", err)
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("the session keys in storage (%s) do not parse: %w", storageKey, err)
	}
	return f, nil
}

// update adds the first key, or the next one when the newest has sealed
// for rotateEvery less announceAhead, and drops the keys whose tokens have
// all expired; it reports whether anything changed. Keys are kept newest
// first.
func (f *keyFile) update(now time.Time) bool {
	slices.SortFunc(f.Keys, func(a, b fileKey) int { return b.SealsFrom.Compare(a.SealsFrom) })
	changed := false
	switch {
	case len(f.Keys) == 0:
		// The first key: no node has sealed anything yet.
		f.Keys = append(f.Keys, newFileKey(now))
		changed = true
	case !f.Keys[0].SealsFrom.After(now) && now.Sub(f.Keys[0].SealsFrom) >= rotateEvery-announceAhead:
		f.Keys = slices.Insert(f.Keys, 0, newFileKey(now.Add(announceAhead)))
		changed = true
	}
	// A key sealed until its successor began to (on a node that had not
	// yet read it, up to refreshEvery later); keepAfter since, nothing it
	// sealed opens.
	for i := 1; i < len(f.Keys); i++ {
		if now.Sub(f.Keys[i-1].SealsFrom) > keepAfter {
			f.Keys = f.Keys[:i]
			changed = true
			break
		}
	}
	return changed
}

func newFileKey(sealsFrom time.Time) fileKey {
	secret := make([]byte, 32)
	rand.Read(secret) // never fails (crypto/rand)
	return fileKey{Secret: secret, SealsFrom: sealsFrom.UTC().Truncate(time.Second)}
}

// ring is the keyring at now: the newest key that seals from now or before
// seals (or, on a node whose clock is behind the one that wrote the first
// key, the oldest); all open.
func (f *keyFile) ring(now time.Time) (*Keyring, error) {
	var sealing *Key
	keys := make([]*Key, 0, len(f.Keys))
	for _, fk := range f.Keys {
		k, err := newKey(fk.Secret)
		if err != nil {
			return nil, fmt.Errorf("the session keys in storage (%s): %w", storageKey, err)
		}
		if sealing == nil && !fk.SealsFrom.After(now) {
			sealing = k
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 && sealing == nil {
		return nil, fmt.Errorf("the session keys in storage (%s): none", storageKey)
	}
	if sealing == nil {
		sealing, keys = keys[len(keys)-1], keys[:len(keys)-1]
	}
	return NewKeyring(append([]*Key{sealing}, keys...)...), nil
}
