package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis client: github.com/redis/go-redis/v9, for reasons the README's
// "Run a fleet" section gives with the measurements behind them: it connects
// lazily (a node starts while Redis is down, and decides without it), it
// honours a context deadline on every call (a stalled Redis costs a
// decision its timeout and no more), it reconnects by itself, and one client
// type speaks to one server or a cluster.

// options are the parsed addresses and credentials.
type options struct {
	u     redis.UniversalOptions
	addrs []string // host:port, for the status and metrics
}

// name is the addresses as logs, metrics and the status show them: no
// credentials.
func (o *options) name() string { return strings.Join(o.addrs, ",") }

// parseAddresses reads redis://, rediss:// and host:port addresses. One
// address is a server; several are the seed nodes of a cluster, and must
// agree on TLS and credentials (a cluster has no databases but 0).
func parseAddresses(addrs []string, user, pass string) (*options, error) {
	o := &options{}
	for i, a := range addrs {
		if !strings.Contains(a, "://") {
			if _, _, err := splitHostPort(a); err != nil {
				return nil, fmt.Errorf("address %q: %w", a, err)
			}
			o.addrs = append(o.addrs, a)
			continue
		}
		parsed, err := redis.ParseURL(a)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", redactURL(a), err)
		}
		o.addrs = append(o.addrs, parsed.Addr)
		if i == 0 {
			o.u.Username, o.u.Password, o.u.DB, o.u.TLSConfig = parsed.Username, parsed.Password, parsed.DB, parsed.TLSConfig
		} else if (parsed.TLSConfig != nil) != (o.u.TLSConfig != nil) {
			return nil, errors.New("addresses: mix redis:// and rediss://; a cluster's nodes speak one way")
		}
	}
	if len(o.addrs) > 1 && o.u.DB != 0 {
		return nil, fmt.Errorf("addresses: database %d with several addresses: a Redis Cluster has database 0 only", o.u.DB)
	}
	if user != "" {
		o.u.Username = user
	}
	if pass != "" {
		o.u.Password = pass
	}
	o.u.Addrs = o.addrs
	return o, nil
}

func splitHostPort(a string) (host, port string, err error) {
	u, err := url.Parse("redis://" + a)
	if err != nil || u.Port() == "" || u.Hostname() == "" || u.Path != "" || u.User != nil {
		return "", "", errors.New("want host:port, or a redis:// URL")
	}
	return u.Hostname(), u.Port(), nil
}

// redacted is addrs with any password in a URL replaced, for errors.
func redacted(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = redactURL(a)
	}
	return out
}

func redactURL(a string) string {
	u, err := url.Parse(a)
	if err != nil || u.User == nil {
		return a
	}
	return u.Redacted()
}

// goRedis is a conn on a go-redis client, a server's or a cluster's.
type goRedis struct {
	c      redis.UniversalClient
	script *redis.Script
}

// dial makes the client. It does not connect: the first decision does.
func dial(o *options, timeout time.Duration) (conn, error) {
	u := o.u
	u.DialTimeout = timeout
	u.PoolTimeout = timeout
	// Every call is bounded by its context's deadline, the decision's
	// timeout, including the reads and writes of a stalled connection.
	u.ContextTimeoutEnabled = true
	// No retries: a script that timed out may have run, and a retry would
	// take its tokens twice; the breaker decides what comes next.
	u.MaxRetries = -1
	u.DisableIdentity = true // no CLIENT SETINFO: older servers and Valkey log it as unknown
	var c redis.UniversalClient
	if len(o.addrs) > 1 {
		c = redis.NewClusterClient(u.Cluster())
	} else {
		c = redis.NewClient(u.Simple())
	}
	return &goRedis{c: c, script: redis.NewScript(bucketScript)}, nil
}

func (g *goRedis) bucket(ctx context.Context, key string, args []string) ([3]int64, error) {
	var res [3]int64
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	v, err := g.script.Run(ctx, g.c, []string{key}, argv...).Int64Slice()
	if err != nil {
		return res, err
	}
	if len(v) != len(res) {
		return res, fmt.Errorf("bucket script answered %d values, want %d", len(v), len(res))
	}
	copy(res[:], v)
	return res, nil
}

func (g *goRedis) ping(ctx context.Context) error { return g.c.Ping(ctx).Err() }

func (g *goRedis) close() { _ = g.c.Close() }
