// Package redistest runs real redis-server processes for tests: a
// standalone server (Start) or a Redis Cluster of several masters
// (StartCluster), each node on its own loopback port with its own folder
// and log file, stopped when the test ends. Rate limits shared by several
// gateways are tested against the Redis they share in production, with its
// restarts, stalls and cluster redirects, not against a fake.
//
// Tests read what the gateway stored (keys, TTLs, memory) with redis-cli
// (Server.CLI, Cluster.CLI), so this package needs no Go Redis client.
// redis-server and redis-cli (Redis 7) must be on PATH: `make test`
// installs them on Debian-like systems (scripts/ensure-redis).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

const (
	// startTimeout is how long a server has to answer PING after it is
	// started, and a cluster to be formed after its nodes answer.
	startTimeout = 15 * time.Second
	// pollEvery is how often readiness is asked while waiting.
	pollEvery = 20 * time.Millisecond
	// stopTimeout is how long a server has to exit on SIGTERM before it is
	// killed.
	stopTimeout = 5 * time.Second
	// cliTimeout bounds one redis-cli run, so that a test asking a stalled
	// server fails instead of hanging until the test binary times out.
	cliTimeout = 10 * time.Second
)

// Server is one redis-server process on 127.0.0.1. Its methods fail the test
// that started it, so call them from that test's goroutine.
type Server struct {
	t       testing.TB
	port    int
	busPort int // the cluster bus port; 0 for a standalone server
	dir     string

	mu   sync.Mutex
	proc *process // the running process, or nil
}

// process is one run of redis-server: Restart starts another on the same
// port.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
}

// Start runs a standalone redis-server on a free loopback port, with
// nothing saved to disk, and returns once it answers PING. t.Cleanup stops
// it.
func Start(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, false)
	if err := s.launch(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s.waitReady()
	return s
}

// newServer picks the ports and the folder of a server and registers its
// stop with t.Cleanup; it does not start it.
func newServer(t testing.TB, cluster bool) *Server {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("redistest: %s (Redis 7) is not on PATH: run the tests with `make test`, which installs it, or install it with `apt-get install redis-server`", bin)
		}
	}
	// The folder is made before the cleanup below is registered, so that
	// it is removed after the server has stopped writing to it.
	s := &Server{t: t, port: freePort(t), dir: t.TempDir()}
	if cluster {
		// The bus port is given explicitly: the default, port+10000, is
		// past 65535 for much of the range free ports come from.
		s.busPort = freePort(t)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("redistest: log of redis on %s:\n%s", s.Addr(), s.logTail(2000))
		}
	})
	return s
}

// freePort is a loopback port no other server of this test binary is given,
// not even while its server is killed and waits to be restarted on it.
func freePort(t testing.TB) int {
	t.Helper()
	_, p, err := net.SplitHostPort(mcptest.FreeLoopbackAddr(t))
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return port
}

// Addr is the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's database 0 as a URL, "redis://127.0.0.1:PORT/0".
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir is the server's folder: its log (redis.log) and, in a cluster, its
// nodes.conf.
func (s *Server) Dir() string { return s.dir }

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

// args are redis-server's options: only loopback, nothing saved, so that a
// restart starts empty as a crashed cache server does; DEBUG allowed from
// loopback, so that tests can make the server slow (DEBUG SLEEP).
func (s *Server) args() []string {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", s.logPath(),
		"--daemonize", "no",
		"--enable-debug-command", "local",
	}
	if s.busPort != 0 {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return args
}

// launch starts redis-server without waiting for it to answer.
func (s *Server) launch() error {
	// Output written before redis opens its log file (a bad option, a
	// port in use) goes to the same file.
	out, err := os.OpenFile(s.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("redis-server", s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	p := &process{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The server is started and waited for from one locked thread:
		// the thread lives as long as the server, so that the kernel kills
		// the server when the test binary dies without its cleanups (a
		// test timeout) and never before (see killWithParent).
		runtime.LockOSThread()
		killWithParent(cmd)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting redis-server on %s: %w", s.Addr(), err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// running is the process, or nil when it was never started or has exited.
func (s *Server) running() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	select {
	case <-s.proc.exited:
		return nil
	default:
		return s.proc
	}
}

// waitReady returns once the server answers PING, and fails the test if it
// exits first or does not answer in time.
func (s *Server) waitReady() {
	s.t.Helper()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for {
		out, err := s.cli(time.Second, false, "PING")
		if err == nil && out == "PONG" {
			return
		}
		select {
		case <-p.exited:
			s.t.Fatalf("redistest: redis-server on %s exited before answering PING (%s):\n%s", s.Addr(), p.cmd.ProcessState, s.logTail(2000))
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: redis-server on %s does not answer PING after %s: %v %s\n%s", s.Addr(), startTimeout, err, out, s.logTail(2000))
		}
		time.Sleep(pollEvery)
	}
}

// Kill ends the server at once (SIGKILL), as a crash or an out-of-memory
// kill does, and returns once it is gone: connections to it are reset and
// its port refuses new ones. Its data is lost.
func (s *Server) Kill() {
	s.t.Helper()
	if p := s.running(); p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// Restart starts the server again on the same port, killing it first if it
// runs, and returns once it answers PING. It starts empty; a cluster node
// rejoins its cluster with the slots it had.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	s.waitReady()
}

// Stall freezes the server (SIGSTOP): it keeps its connections and accepts
// new ones but answers nothing, as a server behind a stalled network or in
// a long pause does, until Resume.
func (s *Server) Stall() {
	s.t.Helper()
	if p := s.running(); p != nil {
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			s.t.Fatalf("redistest: stalling redis on %s: %v", s.Addr(), err)
		}
	}
}

// Resume lets a stalled server answer again (SIGCONT): it then answers
// what it was sent while stalled.
func (s *Server) Resume() {
	s.t.Helper()
	if p := s.running(); p != nil {
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			s.t.Fatalf("redistest: resuming redis on %s: %v", s.Addr(), err)
		}
	}
}

// stop ends the server: SIGTERM, then SIGKILL if it has not exited in
// stopTimeout.
func (s *Server) stop() {
	p := s.running()
	if p == nil {
		return
	}
	// A stalled server does not act on SIGTERM until it is resumed.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// CLI runs `redis-cli -p PORT args...` against the server and returns its
// output, trimmed: a reply per line, "" for a missing key. An error reply, a
// refused connection or no answer within 10 seconds fails the test. A
// cluster node's CLI follows MOVED and ASK redirections (redis-cli -c).
func (s *Server) CLI(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.cli(cliTimeout, s.busPort != 0, args...)
	if err != nil {
		t.Fatalf("redistest: redis-cli -p %d %s: %v\n%s", s.port, strings.Join(args, " "), err, out)
	}
	return out
}

// cli runs redis-cli against the server, following cluster redirections if
// follow is set; an error reply is an error (redis-cli -e).
func (s *Server) cli(timeout time.Duration, follow bool, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	opts := []string{"-e", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port)}
	if follow {
		opts = append(opts, "-c")
	}
	cmd := exec.CommandContext(ctx, "redis-cli", append(opts, args...)...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "", fmt.Errorf("no answer in %s (is the server stalled or stopped?)", timeout)
	}
	return strings.TrimSpace(string(out)), err
}

// logTail is the end of the server's log, at most n bytes.
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(b[max(0, len(b)-n):])
}
