package results

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/resultstore"
)

// StoreConfig is where the results of the tools that page (Config.Page)
// are kept whole: Caddy's configured storage, encrypted (resultstore).
type StoreConfig struct {
	// Key is the secret the results are encrypted and their links sealed
	// under, at least 32 bytes once its placeholders ({env.X}) are
	// replaced. It is required: the storage is read by whoever runs it,
	// and the key must not be kept there. Nodes that share the storage
	// share the key.
	Key string `json:"key,omitempty"`
	// TTL is how long a result is kept (default 1h, at most 7 days).
	TTL caddy.Duration `json:"ttl,omitempty"`
	// MaxResult bounds one result's text, in bytes (default 256 MiB).
	MaxResult int64 `json:"max_result,omitempty"`
	// PerPrincipal and PerPrincipalCount bound the bytes and the results
	// kept for one caller (default 1 GiB, 64).
	PerPrincipal      int64 `json:"per_principal,omitempty"`
	PerPrincipalCount int   `json:"per_principal_count,omitempty"`
	// Total bounds the bytes kept in all, as this node counts them
	// (default 16 GiB).
	Total int64 `json:"total,omitempty"`
}

// errNoKey refuses page without a key.
var errNoKey = errors.New("results: page keeps whole results in Caddy's storage, which whoever runs the server can read: " +
	"give store { key <secret> } (at least 32 random bytes, such as {env.MCP_RESULTS_KEY}), a secret kept out of that storage, " +
	"which encrypts the results and seals their links")

// validate checks the store's settings as written.
func (s *StoreConfig) validate(pages bool) error {
	switch {
	case !pages:
		return errors.New("results: store keeps the results of the tools that page: name them with page")
	case s == nil || s.Key == "":
		return errNoKey
	case s.TTL < 0 || time.Duration(s.TTL) > resultstore.MaxTTL:
		return fmt.Errorf("results: store: ttl %v: at most %v", time.Duration(s.TTL), resultstore.MaxTTL)
	case s.MaxResult < 0 || s.PerPrincipal < 0 || s.PerPrincipalCount < 0 || s.Total < 0:
		return errors.New("results: store: a bound is a positive size")
	}
	return nil
}

// limits are the store's bounds (its zero fields: the defaults).
func (s *StoreConfig) limits() resultstore.Limits {
	return resultstore.Limits{
		TTL: time.Duration(s.TTL), MaxResult: s.MaxResult,
		PerOwner: s.PerPrincipal, PerOwnerCount: s.PerPrincipalCount, Total: s.Total,
	}
}

// openStore opens the store of cfg on storage, its key's placeholders
// replaced, counting against the ledger the stores of the same storage,
// key and bounds share (ledgers): that of the config before a reload, and
// of the other handlers that keep results alike. It returns the ledger's
// key in that pool, to let go of with the store.
func openStore(cfg *StoreConfig, storage certmagic.Storage) (*resultstore.Store, string, error) {
	key := caddy.NewReplacer().ReplaceKnown(cfg.Key, "")
	if len(key) < resultstore.MinKey {
		return nil, "", fmt.Errorf("results: store: the key is %d bytes once its placeholders are replaced; want at least %d (openssl rand -base64 32)", len(key), resultstore.MinKey)
	}
	pooled := ledgerKey(storage, key, cfg.limits())
	v, _, err := ledgers.LoadOrNew(pooled, func() (caddy.Destructor, error) {
		l, err := resultstore.NewLedger(cfg.limits())
		return sharedLedger{l}, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("results: store: %w", err)
	}
	s, err := resultstore.OpenShared(storage, []byte(key), v.(sharedLedger).Ledger, nil)
	if err != nil {
		_, _ = ledgers.Delete(pooled)
		return nil, "", fmt.Errorf("results: store: %w", err)
	}
	return s, pooled, nil
}

// ledgers are the accounts of what the stores keep, which survive config
// reloads, by storage, key and bounds (ledgerKey): a reload does not give
// every caller its bounds anew while what it kept before is still kept.
var ledgers = caddy.NewUsagePool()

type sharedLedger struct{ *resultstore.Ledger }

func (sharedLedger) Destruct() error { return nil }

// ledgerKey names the ledger of the stores on storage under key within
// lim: the storage by its type and, where it says, its location (a
// storage that does not is counted with the others of its type: stricter,
// never looser); the key by its digest.
func ledgerKey(storage certmagic.Storage, key string, lim resultstore.Limits) string {
	where := fmt.Sprintf("%T", storage)
	if s, ok := storage.(fmt.Stringer); ok {
		where += " " + s.String()
	}
	digest := sha256.Sum256([]byte(key))
	return fmt.Sprintf("%s\x00%x\x00%+v", where, digest, lim)
}

// sweepEvery is how often expired results are deleted; sweepCalls bounds
// the storage calls of one sweep, and sweepTimeout its time.
const (
	sweepEvery   = time.Minute
	sweepCalls   = 1000
	sweepTimeout = 30 * time.Second
)

// siteSweep names the sweep's goroutine, where it recovers.
const siteSweep = "results_sweep"

// sweeper deletes a store's expired results every sweepEvery, until
// stopped.
type sweeper struct {
	stop, done chan struct{}
}

// sweep starts sweeping s.
func sweep(s *resultstore.Store, logger *zap.Logger) *sweeper {
	sw := &sweeper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sw.done)
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-sw.stop:
				return
			case <-t.C:
				sweepOnce(s, logger)
			}
		}
	}()
	return sw
}

// sweepOnce runs one bounded sweep, recovering its panic.
func sweepOnce(s *resultstore.Store, logger *zap.Logger) {
	defer panics.Recover(logger, siteSweep)
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	if _, err := s.Sweep(ctx, sweepCalls); err != nil {
		logger.Warn("deleting expired tool results failed", zap.Error(err))
	}
}

// Stop stops the sweeping and waits for it to end.
func (sw *sweeper) Stop() {
	close(sw.stop)
	<-sw.done
}

// ownerOf is whom a call's result is kept for: its verified principal's
// issuer and subject, else its session as the client names it
// (feature.ClientSessionVar, when federation gave the request a server's
// own); "" when it has neither.
func ownerOf(x *feature.Exchange) string {
	if p := x.Principal; p != nil && p.Subject != "" {
		return "principal\x00" + p.Issuer + "\x00" + p.Subject
	}
	if x.Request != nil {
		if sid, _ := caddyhttp.GetVar(x.Request.Context(), feature.ClientSessionVar).(string); sid != "" {
			return "session\x00" + sid // the client's, not the server's (federation)
		}
		if sid := x.Request.Header.Get("Mcp-Session-Id"); sid != "" {
			return "session\x00" + sid
		}
	}
	return ""
}

// storeStatus is the store's section of /mcp/status.
type storeStatus struct {
	resultstore.Status
	TTL               string `json:"ttl"`
	MaxResult         int64  `json:"max_result"`
	PerPrincipal      int64  `json:"per_principal"`
	PerPrincipalCount int    `json:"per_principal_count"`
	Total             int64  `json:"total"`
}

func statusOf(s *resultstore.Store) storeStatus {
	l := s.Limits()
	return storeStatus{Status: s.Status(), TTL: l.TTL.String(), MaxResult: l.MaxResult, PerPrincipal: l.PerOwner, PerPrincipalCount: l.PerOwnerCount, Total: l.Total}
}
