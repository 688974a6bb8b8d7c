package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of masters without replicas, each a Server on
// 127.0.0.1, the 16384 hash slots shared among them.
type Cluster struct {
	nodes []*Server
}

// StartCluster runs masters redis-server nodes in cluster mode (at least 3,
// as redis-cli --cluster create requires; cluster-node-timeout 2s, so that
// a killed node is noticed quickly), joins them with the slots shared
// evenly, and returns once every node reports the cluster ok and knows
// every other. t.Cleanup stops every node.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	c := &Cluster{}
	for range masters {
		c.nodes = append(c.nodes, newServer(t, true))
	}
	// The nodes start side by side, then are waited for.
	for _, n := range c.nodes {
		if err := n.launch(); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	for _, n := range c.nodes {
		n.waitReady()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	create := append([]string{"--cluster", "create"}, c.Addrs()...)
	create = append(create, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, "redis-cli", create...)
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(create, " "), err, out)
	}
	deadline := time.Now().Add(startTimeout)
	for _, n := range c.nodes {
		for {
			info, err := n.cli(time.Second, false, "CLUSTER", "INFO")
			if err == nil && clusterReady(info, masters) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: the cluster is not ok on %s after %s: %v\n%s", n.Addr(), startTimeout, err, info)
			}
			time.Sleep(pollEvery)
		}
	}
	return c
}

// clusterReady reports whether CLUSTER INFO says the cluster is ok and the
// node knows all masters nodes: a node that has not heard of one yet
// would send a client to a node it cannot name.
func clusterReady(info string, masters int) bool {
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields["cluster_state"] == "ok" && fields["cluster_known_nodes"] == strconv.Itoa(masters)
}

// Nodes are the cluster's nodes, to kill, restart or stall one.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Addrs are the nodes' addresses, "127.0.0.1:PORT".
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URLs are the nodes' URLs, "redis://127.0.0.1:PORT/0".
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = n.URL()
	}
	return urls
}

// CLI runs `redis-cli -c` against the first node that answers, following
// redirections to the node holding the key: the test need not know which
// node that is. It fails the test as Server.CLI does.
func (c *Cluster) CLI(t testing.TB, args ...string) string {
	t.Helper()
	var errs []error
	for _, n := range c.nodes {
		out, err := n.cli(cliTimeout, true, args...)
		if err == nil {
			return out
		}
		errs = append(errs, fmt.Errorf("%s: %w: %s", n.Addr(), err, out))
		if !refused(out) {
			break
		}
	}
	t.Fatalf("redistest: redis-cli -c %s: %v", strings.Join(args, " "), errors.Join(errs...))
	return ""
}

// refused reports whether redis-cli's output says the node was not there,
// so that asking another node may help.
func refused(out string) bool {
	return strings.Contains(out, "Could not connect") || strings.Contains(out, "Connection refused")
}
