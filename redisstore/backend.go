package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// The breaker: Redis is taken as down after tripAfter exchanges in a row
// failed (a timeout, a broken connection: not an error reply about one
// key), and asked again by a probe after probeFirst, then at intervals
// doubling up to probeEvery, so that a pause of a few milliseconds (a fork
// for a snapshot, a slow command) costs the node little, and an outage no
// timeout per request.
const (
	tripAfter  = 3
	probeFirst = 100 * time.Millisecond
	probeEvery = time.Second
)

// Where a panic is recovered (package panics): in the probe, and in the
// making of the client.
const (
	siteProbe   = "redis_probe"
	siteConnect = "redis_connect"
)

// errProbePanicked is the outcome of a probe that panicked.
var errProbePanicked = errors.New("the probe of redis failed: the gateway's bug, logged")

// conn is what a store needs of a Redis client: the bucket script and a
// probe. It is safe for concurrent use.
type conn interface {
	// buckets runs the bucket script's op ("take" or "refund") on keys,
	// args holding each key's cost, burst, events and window, four a key,
	// in one round trip. A run of the script takes all or nothing of its
	// keys: on a single Redis one run holds up to 64 keys (a request's
	// buckets all, but for the widest batches); on a cluster, where the
	// keys of a script must share a slot, each key has a run. kept[i]
	// reports whether key i's take was written: it was allowed, and so was
	// every other key of its run. errs[i] is Redis's error reply about key
	// i (the script failed on it, or on the run that held it: no memory, no
	// permission); err is a failure of the exchange itself, which decided
	// nothing.
	buckets(ctx context.Context, op string, keys, args []string) (res [][3]int64, kept []bool, errs []error, err error)
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
	// The backend's series, looked up once: decisions made in Redis, not
	// made for an error, not made for Redis being down; round trips.
	inRedis, failed, skipped prometheus.Counter
	roundTrip                prometheus.Observer

	// down is set while Redis does not answer: decisions skip it, and one
	// prober asks it. failures counts the exchanges that failed in a row.
	down     atomic.Bool
	failures atomic.Int32
	// refusedLog is when an error reply was last logged (unix ns).
	refusedLog atomic.Int64
	mu         sync.Mutex
	since      time.Time
	lastErr    string
	stop       context.CancelFunc
	stopping   context.Context
}

func newBackend(c conn, timeout time.Duration, name string, logger *zap.Logger) *backend {
	ctx, stop := context.WithCancel(context.Background())
	return &backend{conn: c, timeout: timeout, name: name, logger: logger, stopping: ctx, stop: stop,
		inRedis: decisions.WithLabelValues(name, "redis"), failed: decisions.WithLabelValues(name, "error"),
		skipped: decisions.WithLabelValues(name, "down"), roundTrip: latency.WithLabelValues(name)}
}

// Destruct closes the client once no config uses the backend.
func (b *backend) Destruct() error {
	b.stop()
	b.conn.close()
	return nil
}

// run runs the bucket script's op on keys in one round trip, unless Redis
// is known to be down; decided[i] is false when Redis did not decide key
// i, and kept[i] says whether a take of it was written (conn.buckets).
func (b *backend) run(op string, keys, args []string) (res [][3]int64, decided, kept []bool) {
	decided = make([]bool, len(keys))
	if b.down.Load() {
		b.skipped.Add(float64(len(keys)))
		return nil, decided, nil
	}
	ctx, cancel := context.WithTimeout(b.stopping, b.timeout)
	start := time.Now()
	res, kept, errs, err := b.conn.buckets(ctx, op, keys, args)
	cancel()
	b.roundTrip.Observe(time.Since(start).Seconds())
	if err != nil {
		b.failed.Add(float64(len(keys)))
		if b.failures.Add(1) >= tripAfter {
			b.trip(err)
		}
		return nil, decided, nil
	}
	b.failures.Store(0)
	for i, e := range errs {
		if e != nil {
			// An error reply about this key: this decision fails, the
			// others stand, and Redis is not down.
			b.failed.Inc()
			b.logRefused(e)
			continue
		}
		decided[i] = true
		b.inRedis.Inc()
	}
	return res, decided, kept
}

// logRefused logs an error reply, once a minute at most.
func (b *backend) logRefused(err error) {
	now := time.Now().UnixNano()
	if last := b.refusedLog.Load(); now-last >= int64(time.Minute) && b.refusedLog.CompareAndSwap(last, now) {
		b.logger.Warn("redis refused a rate-limit decision: it is made as on_error says",
			zap.String("redis", b.name), zap.Error(err))
	}
}

// TakeAll makes the decisions of several limits' stores on this Redis in
// one round trip, all or nothing: a request meeting two limits costs one
// round trip, not two, and on a single Redis a request one limit refuses
// costs no more, since the script then writes no bucket. On a cluster
// (or past 64 buckets) the tokens the other runs took go back in a second
// round trip; decisions made without Redis give theirs back to the node's
// own buckets.
func (b *backend) TakeAll(now time.Time, reqs []ratelimit.Request, out []ratelimit.Decision) {
	res, decided, kept := b.runFor("take", reqs)
	denied := false
	for i, r := range reqs {
		if decided[i] {
			out[i] = decision(res[i])
		} else {
			out[i] = r.Store.(*Store).unchecked(now, r.Key, r.Cost, r.Limit)
		}
		denied = denied || !out[i].Allowed
	}
	if !denied {
		return
	}
	var back []ratelimit.Request // taken in Redis
	for i, r := range reqs {
		switch s := r.Store.(*Store); {
		case !out[i].Allowed:
		case !decided[i]:
			s.uncheckedRefund(now, r.Key, r.Cost, r.Limit)
		case kept[i]:
			back = append(back, r)
		}
	}
	if len(back) > 0 {
		b.RefundEach(now, back)
	}
}

// RefundEach gives back several limits' tokens on this Redis in one round
// trip; those Redis cannot take back go to the node's own buckets where
// on_error is local.
func (b *backend) RefundEach(now time.Time, reqs []ratelimit.Request) {
	_, decided, _ := b.runFor("refund", reqs)
	for i, r := range reqs {
		if !decided[i] {
			r.Store.(*Store).uncheckedRefund(now, r.Key, r.Cost, r.Limit)
		}
	}
}

// runFor runs the bucket script's op ("take" or "refund") for each request
// of this Redis's stores, in one round trip.
func (b *backend) runFor(op string, reqs []ratelimit.Request) (res [][3]int64, decided, kept []bool) {
	keys := make([]string, len(reqs))
	args := make([]string, 0, 4*len(reqs))
	for i, r := range reqs {
		s := r.Store.(*Store)
		keys[i] = s.bucketKey(r.Key)
		args = s.appendArgs(args, r.Cost, r.Limit)
	}
	return b.run(op, keys, args)
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
	up.WithLabelValues(b.name).Set(0) // under mu, so that it follows down
	b.logger.Warn("redis does not answer: rate limits are decided without it until it does",
		zap.String("redis", b.name), zap.Duration("timeout", b.timeout), zap.Error(err))
	go b.probe()
}

// probe asks Redis, after probeFirst and then at intervals doubling up to
// probeEvery, until it answers; then decisions go to it again. It runs on
// a goroutine of its own, until Redis answers: a probe that panics is one
// that failed.
func (b *backend) probe() {
	wait := probeFirst
	for {
		t := time.NewTimer(wait)
		select {
		case <-b.stopping.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, probeEvery)
		err := b.ping()
		b.mu.Lock()
		if err != nil {
			b.lastErr = err.Error()
			b.mu.Unlock()
			continue
		}
		down := time.Since(b.since)
		b.failures.Store(0)
		b.down.Store(false)
		up.WithLabelValues(b.name).Set(1)
		b.mu.Unlock()
		b.logger.Info("redis answers again: rate limits are decided in it",
			zap.String("redis", b.name), zap.Duration("down_for", down))
		return
	}
}

// ping asks Redis once, within the backend's timeout.
func (b *backend) ping() (err error) {
	defer panics.Recover(b.logger, siteProbe, func() { err = errProbePanicked })
	ctx, cancel := context.WithTimeout(b.stopping, b.timeout)
	defer cancel()
	return b.conn.ping(ctx)
}

// health is the backend's state for the status view.
func (b *backend) health() (healthy bool, since time.Time, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.down.Load(), b.since, b.lastErr
}
