package redistest

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServer(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.URL() != "redis://"+s.Addr()+"/0" {
		t.Fatalf("Addr %q, URL %q", s.Addr(), s.URL())
	}
	s.CLI(t, "SET", "k", "v", "EX", "100")
	if got := s.CLI(t, "GET", "k"); got != "v" {
		t.Fatalf("GET k = %q", got)
	}
	if ttl, err := strconv.Atoi(s.CLI(t, "TTL", "k")); err != nil || ttl <= 0 || ttl > 100 {
		t.Fatalf("TTL k = %d, %v", ttl, err)
	}
	if n, err := strconv.Atoi(s.CLI(t, "MEMORY", "USAGE", "k")); err != nil || n <= 0 {
		t.Fatalf("MEMORY USAGE k = %d, %v", n, err)
	}
	if got := s.CLI(t, "GET", "missing"); got != "" {
		t.Fatalf("GET missing = %q, want empty", got)
	}

	s.Stall()
	if out, err := s.cli(300*time.Millisecond, false, "PING"); err == nil {
		t.Fatalf("a stalled server answered PING: %q", out)
	}
	s.Resume()
	if got := s.CLI(t, "PING"); got != "PONG" {
		t.Fatalf("PING after Resume = %q", got)
	}

	addr := s.Addr()
	s.Kill()
	// Refused at once: the bound is only for redis-cli to start on a
	// loaded machine.
	if out, err := s.cli(cliTimeout, false, "PING"); err == nil || !refused(out) {
		t.Fatalf("a killed server: PING = %q, %v", out, err)
	}
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("restarted on %s, not %s", s.Addr(), addr)
	}
	if got := s.CLI(t, "EXISTS", "k"); got != "0" {
		t.Fatalf("a restarted server kept its keys: EXISTS k = %q", got)
	}
}

// TestCleanupStops checks that no server outlives its test, a stalled one
// included.
func TestCleanupStops(t *testing.T) {
	t.Parallel()
	var pids []int
	for _, stall := range []bool{false, true} {
		t.Run(fmt.Sprintf("stalled=%v", stall), func(t *testing.T) {
			s := Start(t)
			pids = append(pids, s.running().cmd.Process.Pid)
			if stall {
				s.Stall()
			}
		})
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("redis-server %d still there after its test: %v", pid, err)
		}
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartCluster(t, 3)
	t.Logf("cluster of 3 ready in %s", time.Since(start).Round(time.Millisecond))
	if len(c.Addrs()) != 3 || len(c.URLs()) != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("Addrs %v, URLs %v", c.Addrs(), c.URLs())
	}

	// Keys land on the nodes owning their slots; redis-cli -c follows the
	// redirections.
	const keys = 30
	for i := range keys {
		c.CLI(t, "SET", fmt.Sprintf("key%d", i), strconv.Itoa(i))
	}
	for i := range keys {
		if got := c.CLI(t, "GET", fmt.Sprintf("key%d", i)); got != strconv.Itoa(i) {
			t.Fatalf("GET key%d = %q", i, got)
		}
	}
	total, holding := 0, 0
	for _, n := range c.Nodes() {
		size, err := strconv.Atoi(n.CLI(t, "DBSIZE"))
		if err != nil {
			t.Fatal(err)
		}
		total += size
		if size > 0 {
			holding++
		}
	}
	if total != keys || holding < 2 {
		t.Fatalf("%d keys on %d nodes, want %d keys on 2 or more", total, holding, keys)
	}

	// A restarted node rejoins with its slots, empty.
	n := c.Nodes()[1]
	start = time.Now()
	n.Restart()
	deadline := time.Now().Add(startTimeout)
	for {
		info, err := n.cli(time.Second, false, "CLUSTER", "INFO")
		if err == nil && clusterReady(info, 3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted node did not rejoin: %v\n%s", err, info)
		}
		time.Sleep(pollEvery)
	}
	t.Logf("node rejoined in %s", time.Since(start).Round(time.Millisecond))
	if got := n.CLI(t, "DBSIZE"); got != "0" {
		t.Fatalf("a restarted node kept its keys: DBSIZE = %q", got)
	}
}

// fatalRecorder is a test whose Fatalf is recorded instead of failing.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestMissingRedis checks that a machine without Redis gets told how to
// install it, not an error from exec.
func TestMissingRedis(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(r)
		t.Error("Start succeeded without redis-server on PATH")
	}()
	<-done
	for _, want := range []string{"redis-server", "make test", "apt-get install redis-server"} {
		if !strings.Contains(r.msg, want) {
			t.Errorf("the failure does not say %q: %s", want, r.msg)
		}
	}
}
