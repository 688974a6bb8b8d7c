package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// The Redis client is github.com/redis/rueidis, chosen by measurement
// against github.com/redis/go-redis/v9 (docs/performance.md, "The Redis
// client", gives the figures): it pipelines the decisions of concurrent requests over a
// few connections, with half the client CPU, 40 % less Redis CPU and 2.5
// times fewer allocations per decision, and twice the throughput at 64
// concurrent requests; with the write timeout below, a stalled Redis costs
// a decision its deadline and no more, without the burst of new
// connections go-redis dials when deadlines expire; it never retries a
// script, and recovers within a millisecond of a restart. Its one
// drawback, that making a client needs Redis up, is handled by connecting
// lazily (lazyConn).

// connWriteTimeout drops a connection Redis stopped answering on, so that
// requests queued on it fail rather than wait: rueidis's default is 10 s.
// It is also the keep-alive's period.
const connWriteTimeout = 200 * time.Millisecond

// dialTimeout bounds connecting; a request waits for it no longer than
// its decision's timeout.
const dialTimeout = time.Second

// options are the parsed addresses and credentials.
type options struct {
	opt   rueidis.ClientOption
	addrs []string // host:port, for the status and metrics
}

// name is the addresses as logs, metrics and the status show them: no
// credentials.
func (o *options) name() string { return strings.Join(o.addrs, ",") }

// parseAddresses reads redis://, rediss:// and host:port addresses. One
// address is a server (or a cluster node, found to be one); several are
// the seed nodes of a cluster, and must agree on TLS (a cluster has no
// database but 0).
func parseAddresses(addrs []string, user, pass string) (*options, error) {
	o := &options{}
	// An address that does not parse is never quoted in an error: it may
	// hold a password (from an {env.*} placeholder, say).
	for i, a := range addrs {
		if !strings.Contains(a, "://") {
			if err := checkHostPort(a); err != nil {
				return nil, fmt.Errorf("address %d of %d: %w", i+1, len(addrs), err)
			}
			o.addrs = append(o.addrs, a)
			continue
		}
		if s, _, _ := strings.Cut(a, "://"); s != "redis" && s != "rediss" {
			return nil, fmt.Errorf("address %d of %d: invalid URL scheme %q: want redis:// or rediss://", i+1, len(addrs), s)
		}
		parsed, err := rueidis.ParseURL(a)
		if err != nil {
			return nil, fmt.Errorf("address %d of %d: not a valid redis:// URL (redis://[user:password@]host:port[/db])", i+1, len(addrs))
		}
		o.addrs = append(o.addrs, parsed.InitAddress...)
		if i == 0 {
			o.opt.Username, o.opt.Password, o.opt.SelectDB, o.opt.TLSConfig = parsed.Username, parsed.Password, parsed.SelectDB, parsed.TLSConfig
		} else if (parsed.TLSConfig != nil) != (o.opt.TLSConfig != nil) {
			return nil, errors.New("addresses: mix redis:// and rediss://; a cluster's nodes speak one way")
		}
	}
	if len(o.addrs) > 1 && o.opt.SelectDB != 0 {
		return nil, fmt.Errorf("addresses: database %d with several addresses: a Redis Cluster has database 0 only", o.opt.SelectDB)
	}
	if user != "" {
		o.opt.Username = user
	}
	if pass != "" {
		o.opt.Password = pass
	}
	o.opt.InitAddress = o.addrs
	return o, nil
}

func checkHostPort(a string) error {
	u, err := url.Parse("redis://" + a)
	if err != nil || u.Port() == "" || u.Hostname() == "" || u.Path != "" || u.User != nil {
		return errors.New("want host:port, or a redis:// URL")
	}
	return nil
}

// lazyConn is a conn on a rueidis client made when Redis first answers:
// rueidis connects when the client is made, and a node must start while
// Redis is down.
type lazyConn struct {
	opt    rueidis.ClientOption
	client atomic.Pointer[rueidis.Client]
	// use keeps the client from being closed under a call: a call holds it
	// for reading while it uses the client, close for writing. rueidis
	// dials a connection for a call that needs one, and one dialed as the
	// client is closed stays open for good: with Caddy cleaning up a
	// config while its last requests still decide, each reload could leave
	// connections to Redis behind.
	use sync.RWMutex
	// mu guards attempt, the attempt to make the client under way (closed
	// when it ends: one at a time, however many requests wait for it),
	// and closed (written under use's write lock as well).
	mu      sync.Mutex
	attempt chan struct{}
	lastErr error
	closed  bool
	script  *rueidis.Lua
	sha     string
	// logger is told of an attempt to make the client that panicked.
	logger *zap.Logger
	// split: Redis refused a script on keys of several slots (CROSSSLOT)
	// though it is no cluster to the client; each key gets a run.
	split atomic.Bool
}

// dial returns the conn, and starts connecting in the background, telling
// logger of a panic there.
func dial(o *options, logger *zap.Logger) conn {
	opt := o.opt
	opt.DisableCache = true // no client-side caching: every decision is Redis's
	opt.DisableRetry = true // a script that failed may have run: never take tokens twice
	opt.ConnWriteTimeout = connWriteTimeout
	opt.Dialer.KeepAlive = connWriteTimeout
	opt.Dialer.Timeout = dialTimeout
	sum := sha1.Sum([]byte(bucketScript))
	c := &lazyConn{opt: opt, script: rueidis.NewLuaScript(bucketScript), sha: hex.EncodeToString(sum[:]), logger: logger}
	c.connecting()
	return c
}

// get returns the client, waiting for an attempt to make it at most until
// ctx is done.
func (c *lazyConn) get(ctx context.Context) (rueidis.Client, error) {
	if p := c.client.Load(); p != nil {
		return *p, nil
	}
	done := c.connecting()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("connecting to redis: %w", ctx.Err())
	}
	if p := c.client.Load(); p != nil {
		return *p, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return nil, c.lastErr
}

// connecting returns the channel closed when the attempt to make the
// client ends, starting one unless one is under way.
func (c *lazyConn) connecting() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attempt != nil {
		return c.attempt
	}
	done := make(chan struct{})
	c.attempt = done
	go c.connect(done)
	return done
}

// errConnectPanicked is the outcome of an attempt to make the client that
// panicked.
var errConnectPanicked = errors.New("connecting to redis failed: the gateway's bug, logged")

// connect makes the client, on a goroutine of its own, and closes done
// once the attempt is over. An attempt that panics is one that failed:
// the next request tries again.
func (c *lazyConn) connect(done chan struct{}) {
	var client rueidis.Client
	err := errConnectPanicked
	defer func() { c.attempted(done, client, err) }()
	defer panics.Recover(c.logger, siteConnect)
	client, err = rueidis.NewClient(c.opt)
}

// attempted records the end of an attempt to make the client.
func (c *lazyConn) attempted(done chan struct{}, client rueidis.Client, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.lastErr = err
	case c.closed:
		client.Close()
		c.lastErr = errClosed
	default:
		c.client.Store(&client)
	}
	c.attempt = nil
	close(done)
}

func (c *lazyConn) buckets(ctx context.Context, op string, keys, args []string) ([][3]int64, []bool, []error, error) {
	c.use.RLock()
	defer c.use.RUnlock()
	if c.closed { // written under use's write lock
		return nil, nil, nil, errClosed
	}
	client, err := c.get(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	single := client.Mode() != rueidis.ClientModeCluster && !c.split.Load()
	runs := scriptRuns(op, keys, args, single)
	results := c.run(ctx, client, runs)
	if single && len(runs) == 1 && len(keys) > 1 && crossSlot(results[0]) {
		// A proxy in front of a sharded Redis (one that is not a cluster
		// to the client) refuses a script whose keys are in several
		// slots: from now on each key has a script of its own.
		c.split.Store(true)
		runs = scriptRuns(op, keys, args, false)
		results = c.run(ctx, client, runs)
	}
	res := make([][3]int64, len(keys))
	kept := make([]bool, len(keys))
	errs := make([]error, len(keys))
	k := 0
	for i, r := range results {
		run := runs[i]
		if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() {
			// Redis restarted, or failed over, and lost its scripts: this
			// one goes alone, loading the script again.
			r = c.script.Exec(ctx, client, run.keys, run.argv)
		}
		err := r.Error()
		if err == nil {
			err = answer(r, res[k:k+len(run.keys)])
		} else if _, reply := rueidis.IsRedisErr(err); !reply {
			return nil, nil, nil, err // the exchange failed: nothing was decided
		}
		all := err == nil
		for j := range run.keys {
			errs[k+j] = err
			all = all && res[k+j][0] == 1
		}
		for j := range run.keys {
			kept[k+j] = all && op == "take"
		}
		k += len(run.keys)
	}
	return res, kept, errs, nil
}

// run sends the runs in one round trip.
func (c *lazyConn) run(ctx context.Context, client rueidis.Client, runs []scriptRun) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(runs))
	for i, r := range runs {
		cmds[i] = client.B().Evalsha().Sha1(c.sha).Numkeys(int64(len(r.keys))).Key(r.keys...).Arg(r.argv...).Build()
	}
	results := client.DoMulti(ctx, cmds...)
	for try := 1; try < connTries && ctx.Err() == nil && brokenConn(results); try++ {
		// Redis restarted, or a connection broke: each of the client's
		// connections fails once before it is made anew. After a restart
		// the command never reached the Redis that answers now; after a
		// connection lost mid-reply it may have run, and the retry takes
		// the tokens twice: the client may be refused a little early,
		// never admitted beyond its limit.
		results = client.DoMulti(ctx, cmds...)
	}
	return results
}

// crossSlot reports whether r is Redis refusing a command whose keys are
// in several slots.
func crossSlot(r rueidis.RedisResult) bool {
	e, ok := rueidis.IsRedisErr(r.Error())
	return ok && strings.HasPrefix(e.Error(), "CROSSSLOT")
}

// scriptRun is one run of the bucket script: op on keys, argv being op and
// each key's four arguments.
type scriptRun struct {
	keys, argv []string
}

// scriptRuns is how the bucket script decides keys: on a single Redis in
// one run, or in runs of maxScriptKeys keys when there are more (a batch of
// many tools on a per-tool limit: one long script would hold Redis from
// every other node's decisions meanwhile); one run per key on a cluster,
// where the keys of a script must share a slot and a request's buckets do
// not.
func scriptRuns(op string, keys, args []string, single bool) []scriptRun {
	per := 1
	if single {
		per = maxScriptKeys
	}
	runs := make([]scriptRun, 0, (len(keys)+per-1)/per)
	for i := 0; i < len(keys); i += per {
		j := min(i+per, len(keys))
		argv := make([]string, 0, 1+4*(j-i))
		runs = append(runs, scriptRun{keys: keys[i:j], argv: append(append(argv, op), args[4*i:4*j]...)})
	}
	return runs
}

// maxScriptKeys bounds the buckets one run of the script decides: at a few
// microseconds each, a run holds Redis well under a millisecond.
const maxScriptKeys = 64

// connTries bounds the attempts on broken connections (see buckets).
const connTries = 3

// brokenConn reports whether every result failed without a reply from
// Redis, as on a connection that broke, and not because a deadline passed.
func brokenConn(results []rueidis.RedisResult) bool {
	for _, r := range results {
		err := r.Error()
		if _, reply := rueidis.IsRedisErr(err); err == nil || reply || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return false
		}
	}
	return true
}

// answer reads the bucket script's answer: three numbers for each bucket
// of res.
func answer(r rueidis.RedisResult, res [][3]int64) error {
	v, err := r.AsIntSlice()
	if err != nil {
		return err
	}
	if len(v) != 3*len(res) {
		return fmt.Errorf("bucket script answered %d values, want %d", len(v), 3*len(res))
	}
	for i := range res {
		copy(res[i][:], v[3*i:])
	}
	return nil
}

// ping runs the bucket script through the pipeline decisions use, on a key
// of its own, giving back nothing (cost 0): a PING could pass on a fresh
// connection while the one decisions go through is still broken. An error
// reply (no permission on the key, say) is an answer too.
func (c *lazyConn) ping(ctx context.Context) error {
	_, _, _, err := c.buckets(ctx, "refund", []string{probeKey}, []string{"0", "1", "1", "1000000000"})
	return err
}

// probeKey is the key a probe refunds nothing to: it is never written.
const probeKey = "caddy-mcp-probe"

// errClosed is a call on a conn that was closed: its config was cleaned up.
var errClosed = errors.New("redis client closed")

// close closes the client once the calls under way have returned (their
// contexts end with the backend's), and refuses calls from then on.
func (c *lazyConn) close() {
	c.use.Lock()
	defer c.use.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if p := c.client.Load(); p != nil {
		(*p).Close()
	}
}
