package mcptest

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// buildProgram builds the Go command pkg, at the versions go.mod requires,
// into a temporary folder and returns the binary.
func buildProgram(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcptest: go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// listenTimeout bounds how long a server may take to print where it
// listens: a failure bound, never waited out by a server that starts.
const listenTimeout = 30 * time.Second

// startListening starts cmd, a server that prints its endpoint as the
// first line of its standard output once it listens, and returns that
// line. Its standard input is a pipe that stays open while the test
// process lives: the servers exit when it closes, so that none outlives a
// test process killed before its cleanups ran. It is stopped by t.Cleanup.
func startListening(t testing.TB, cmd *exec.Cmd, name string) string {
	t.Helper()
	var logs lockedBuffer
	listening := make(chan string, 1)
	cmd.Stdout, cmd.Stderr = &firstLine{line: listening}, &logs
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	exited := startProcess(t, cmd, name, &logs)
	select {
	case url := <-listening:
		return url
	case <-exited:
		t.Fatalf("mcptest: %s exited before it listened:\n%s", name, logs.String())
	case <-time.After(listenTimeout):
		t.Fatalf("mcptest: %s did not listen within %v:\n%s", name, listenTimeout, logs.String())
	}
	return ""
}

// startProcess starts cmd, a server the test runs, and stops it in
// t.Cleanup (killed, then waited for), logging logs, what it wrote, if the
// test failed. The channel returned is closed when it has exited.
func startProcess(t testing.TB, cmd *exec.Cmd, name string, logs *lockedBuffer) <-chan struct{} {
	t.Helper()
	exited, err := launch(cmd)
	if err != nil {
		t.Fatalf("mcptest: starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, logs.String())
		}
	})
	return exited
}

// launch starts cmd and returns a channel closed once it has exited and
// what it wrote to Stdout and Stderr writers (not pipes) has been copied.
func launch(cmd *exec.Cmd) (<-chan struct{}, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return exited, nil
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

// firstLine is a process's standard output that hands over its first line,
// once, and drops the rest. Only the goroutine of exec.Cmd that copies the
// output calls Write.
type firstLine struct {
	buf  []byte
	line chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	if f.line == nil {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.line <- string(f.buf[:i])
		f.line, f.buf = nil, nil
	}
	return len(p), nil
}
