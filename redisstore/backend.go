package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

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
