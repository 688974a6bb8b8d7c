package redisstore

import (
	"context"
	_ "embed"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// bucketScript is the Lua script that takes or gives back tokens: one round
// trip per decision, on Redis's clock.
//
//go:embed bucket.lua
var bucketScript string

// OnError is what a store does with a decision Redis cannot make within
// its timeout.
type OnError string

const (
	// Local decides with the node's own buckets: every limit still holds,
	// per node.
	Local OnError = "local"
	// Allow lets every request through.
	Allow OnError = "allow"
	// Deny refuses every request, for a short while (DenyRetryAfter).
	Deny OnError = "deny"
)

// DenyRetryAfter is when a request refused because Redis could not decide
// is told to retry: the breaker probes Redis every probeEvery.
const DenyRetryAfter = 2 * time.Second

// probeEvery is how often an open breaker asks Redis whether it answers
// again.
const probeEvery = time.Second

// conn is what a store needs of a Redis client: the bucket script and a
// probe. It is safe for concurrent use.
type conn interface {
	// bucket runs the bucket script on key.
	bucket(ctx context.Context, key string, args []string) ([3]int64, error)
	// buckets runs the bucket script on each key, with the args of the same
	// index, in one round trip (a pipeline; on a cluster, one per node, at
	// once).
	buckets(ctx context.Context, keys []string, args [][]string) ([][3]int64, error)
	ping(ctx context.Context) error
	close()
}

// backend is one Redis deployment as the stores using it see it: the
// client, the time a decision may take, and the breaker that stops asking
// Redis while it does not answer. Stores with the same connection settings
// share one backend, across handlers and config reloads.
type backend struct {
	conn    conn
	timeout time.Duration
	name    string // for logs, metrics and the status: the addresses
	logger  *zap.Logger

	// down is set while Redis does not answer: decisions skip it, and one
	// prober asks it every probeEvery.
	down     atomic.Bool
	mu       sync.Mutex
	since    time.Time
	lastErr  string
	stop     context.CancelFunc
	stopping context.Context
}

func newBackend(c conn, timeout time.Duration, name string, logger *zap.Logger) *backend {
	ctx, stop := context.WithCancel(context.Background())
	return &backend{conn: c, timeout: timeout, name: name, logger: logger, stopping: ctx, stop: stop}
}

// Destruct closes the client once no config uses the backend.
func (b *backend) Destruct() error {
	b.stop()
	b.conn.close()
	return nil
}

// run runs the bucket script within the timeout, unless Redis is known to
// be down. ok is false when Redis did not decide.
func (b *backend) run(key string, args []string) (res [3]int64, ok bool) {
	if b.down.Load() {
		decisions.WithLabelValues(b.name, "down").Inc()
		return res, false
	}
	ctx, cancel := context.WithTimeout(b.stopping, b.timeout)
	start := time.Now()
	res, err := b.conn.bucket(ctx, key, args)
	cancel()
	latency.WithLabelValues(b.name).Observe(time.Since(start).Seconds())
	if err != nil {
		decisions.WithLabelValues(b.name, "error").Inc()
		b.trip(err)
		return res, false
	}
	decisions.WithLabelValues(b.name, "redis").Inc()
	return res, true
}

// runEach is run for several buckets in one round trip; ok is false when
// Redis did not decide them.
func (b *backend) runEach(keys []string, args [][]string) (res [][3]int64, ok bool) {
	if b.down.Load() {
		decisions.WithLabelValues(b.name, "down").Add(float64(len(keys)))
		return nil, false
	}
	ctx, cancel := context.WithTimeout(b.stopping, b.timeout)
	start := time.Now()
	res, err := b.conn.buckets(ctx, keys, args)
	cancel()
	latency.WithLabelValues(b.name).Observe(time.Since(start).Seconds())
	if err != nil {
		decisions.WithLabelValues(b.name, "error").Add(float64(len(keys)))
		b.trip(err)
		return nil, false
	}
	decisions.WithLabelValues(b.name, "redis").Add(float64(len(keys)))
	return res, true
}

// TakeEach makes the decisions of several limits' stores on this Redis in
// one round trip: a request meeting two limits costs one round trip, not
// two. (ratelimit.TakeAll gives back the tokens of the others when one is
// denied.)
func (b *backend) TakeEach(now time.Time, reqs []ratelimit.Request, out []ratelimit.Decision) {
	keys := make([]string, len(reqs))
	argv := make([][]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Store.(*Store).bucketKey(r.Key)
		argv[i] = args("take", r.Cost, r.Limit)
	}
	res, ok := b.runEach(keys, argv)
	for i, r := range reqs {
		if !ok {
			out[i] = r.Store.(*Store).unchecked(now, r.Key, r.Cost, r.Limit)
			continue
		}
		out[i] = decision(res[i])
	}
}

// trip marks Redis down after a failed decision and starts the prober,
// logging once per change of state.
func (b *backend) trip(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down.Load() || b.stopping.Err() != nil {
		return // known already, or the client is closing with its last config
	}
	b.down.Store(true)
	b.since, b.lastErr = time.Now(), err.Error()
	up.WithLabelValues(b.name).Set(0)
	b.logger.Warn("redis does not answer: rate limits are decided without it until it does",
		zap.String("redis", b.name), zap.Duration("timeout", b.timeout), zap.Error(err))
	go b.probe()
}

// probe asks Redis every probeEvery until it answers, then lets decisions
// go to it again.
func (b *backend) probe() {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stopping.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(b.stopping, b.timeout)
		err := b.conn.ping(ctx)
		cancel()
		b.mu.Lock()
		if err != nil {
			b.lastErr = err.Error()
			b.mu.Unlock()
			continue
		}
		down := time.Since(b.since)
		b.down.Store(false)
		b.mu.Unlock()
		up.WithLabelValues(b.name).Set(1)
		b.logger.Info("redis answers again: rate limits are decided in it",
			zap.String("redis", b.name), zap.Duration("down_for", down))
		return
	}
}

// health is the backend's state for the status view.
func (b *backend) health() (healthy bool, since time.Time, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.down.Load(), b.since, b.lastErr
}

// Store is one rate limit's buckets in Redis, a ratelimit.Store. When Redis
// cannot decide, it decides as its OnError says, with local as the node's
// own buckets.
//
// A bucket is one Redis key: the key prefix, then the limit's name and the
// bucket's key in braces, a hash tag. A decision touches one key, so it is
// atomic on one node of a cluster, and the tag spreads the buckets over the
// slots by limit and key, whatever a client puts in its key.
type Store struct {
	b *backend
	// head is the bucket keys' beginning: the prefix, "{", the limit's
	// name and ":".
	head    string
	onError OnError
	local   ratelimit.Store
}

var _ ratelimit.Batcher = (*Store)(nil)

func (s *Store) bucketKey(key string) string { return s.head + key + "}" }

// Take takes cost tokens from key's bucket, on Redis's clock (now is only
// used when Redis cannot decide and local does).
func (s *Store) Take(now time.Time, key string, cost int, lim ratelimit.Limit) ratelimit.Decision {
	res, ok := s.b.run(s.bucketKey(key), args("take", cost, lim))
	if !ok {
		return s.unchecked(now, key, cost, lim)
	}
	return decision(res)
}

// Batch is the Redis the store decides in: the stores of one Redis decide
// a request's limits together.
func (s *Store) Batch() ratelimit.Batch { return s.b }

// decision reads the bucket script's answer.
func decision(res [3]int64) ratelimit.Decision {
	return ratelimit.Decision{
		Allowed:    res[0] == 1,
		RetryAfter: time.Duration(res[1]) * time.Microsecond,
		Remaining:  int(res[2]),
	}
}

// Refund gives back cost tokens; when Redis cannot take them back, local
// does (if it decided the Take, it holds them; if not, it ignores a refund
// to a full bucket).
func (s *Store) Refund(now time.Time, key string, cost int, lim ratelimit.Limit) {
	if cost <= 0 {
		return
	}
	if _, ok := s.b.run(s.bucketKey(key), args("refund", cost, lim)); !ok && s.onError == Local {
		s.local.Refund(now, key, cost, lim)
	}
}

// Len is the node's own live buckets: Redis's are not counted from here.
func (s *Store) Len() int { return s.local.Len() }

// unchecked is the decision when Redis could not make it.
func (s *Store) unchecked(now time.Time, key string, cost int, lim ratelimit.Limit) ratelimit.Decision {
	switch s.onError {
	case Allow:
		return ratelimit.Decision{Allowed: true}
	case Deny:
		return ratelimit.Decision{RetryAfter: DenyRetryAfter, Unchecked: true}
	}
	return s.local.Take(now, key, cost, lim)
}

func args(op string, cost int, lim ratelimit.Limit) []string {
	return []string{op, strconv.Itoa(cost), strconv.Itoa(lim.Burst),
		strconv.Itoa(lim.Rate.Events), strconv.FormatInt(int64(lim.Rate.Window), 10)}
}

// validPrefix reports whether a key prefix is usable: a brace would start a
// hash tag and put every bucket on one slot of a cluster.
func validPrefix(p string) bool { return !strings.ContainsAny(p, "{}") }
