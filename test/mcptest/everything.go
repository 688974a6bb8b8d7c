package mcptest

import (
	"bytes"
	"net"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// EverythingServerPkg is the Go SDK's conformance server: the official
// suite's reference for a server that passes every check.
const EverythingServerPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// BuildEverythingServer builds the Go SDK's conformance server
// (everything-server, at the go-sdk version go.mod requires) into a
// temporary folder and returns the binary.
func BuildEverythingServer(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "everything-server")
	cmd := exec.Command("go", "build", "-o", bin, EverythingServerPkg)
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcptest: go build %s: %v\n%s", EverythingServerPkg, err, out)
	}
	return bin
}

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartEverythingServer runs the conformance server in stateful mode on a free
// loopback port and returns "http://localhost:PORT" once it accepts
// connections (it serves MCP on every path). It is killed by t.Cleanup.
func StartEverythingServer(t testing.TB, bin string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(FreeLoopbackAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	hostport := net.JoinHostPort("localhost", port)
	var logs lockedBuffer
	cmd := exec.Command(bin, "-http="+hostport, "-stateless=false")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("mcptest: starting everything-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("everything-server output:\n%s", logs.String())
		}
	})

	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", hostport, time.Second)
		if err == nil {
			_ = conn.Close()
			return "http://" + hostport
		}
		select {
		case <-exited:
			t.Fatalf("mcptest: everything-server exited before listening on %s:\n%s", hostport, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcptest: everything-server not listening on %s after 20s: %v\n%s", hostport, err, logs.String())
		}
	}
}
