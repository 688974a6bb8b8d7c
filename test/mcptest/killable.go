package mcptest

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// DyingServer is a running test/bigserver that a test kills in the middle
// of a call of its tool work, which never answers.
type DyingServer struct {
	// URL is its endpoint ("http://127.0.0.1:PORT/mcp").
	URL string
	// Called receives a value each time the tool work begins.
	Called <-chan struct{}
	cmd    *exec.Cmd
	exited <-chan struct{}
}

// StartDyingServer runs bin (see BuildBigServer), answering event
// streams when sse, else JSON, once it listens. It is stopped by
// t.Cleanup, if Kill did not stop it before.
func StartDyingServer(t testing.TB, bin string, sse bool) *DyingServer {
	t.Helper()
	cmd := exec.Command(bin)
	if sse {
		cmd.Args = append(cmd.Args, "-sse")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd.Stderr = &logs
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	exited := startProcess(t, cmd, "bigserver", &logs)
	lines := bufio.NewScanner(out)
	url := make(chan string, 1)
	called := make(chan struct{}, 16)
	go func() {
		for first := true; lines.Scan(); first = false {
			switch {
			case first:
				url <- strings.TrimSpace(lines.Text())
			case lines.Text() == "called":
				called <- struct{}{}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	s := &DyingServer{Called: called, cmd: cmd, exited: exited}
	select {
	case s.URL = <-url:
		return s
	case <-exited:
		t.Fatalf("mcptest: bigserver exited before it listened:\n%s", logs.String())
	case <-time.After(listenTimeout):
		t.Fatalf("mcptest: bigserver did not listen within %v:\n%s", listenTimeout, logs.String())
	}
	return nil
}

// Kill kills the server with SIGKILL, as a crash or an OOM kill ends a
// process, and returns once it is gone.
func (s *DyingServer) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}
