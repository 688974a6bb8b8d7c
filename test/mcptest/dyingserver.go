package mcptest

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// DyingServerPkg is test/dyingserver: an official Go SDK server whose tool
// work never answers, run as a process of its own so that a test can kill
// it in the middle of a call.
const DyingServerPkg = "github.com/caddymcp/caddy-mcp/test/dyingserver"

// BuildDyingServer builds test/dyingserver into a temporary folder and
// returns the binary.
func BuildDyingServer(t testing.TB) string {
	t.Helper()
	return buildProgram(t, DyingServerPkg)
}

// DyingServer is a running test/dyingserver.
type DyingServer struct {
	// URL is its endpoint ("http://127.0.0.1:PORT/mcp").
	URL string
	// Called receives a value each time the tool work begins.
	Called <-chan struct{}
	cmd    *exec.Cmd
	exited <-chan struct{}
}

// StartDyingServer runs bin (see BuildDyingServer), answering event
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
	exited := startProcess(t, cmd, "dyingserver", &logs)
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
		t.Fatalf("mcptest: dyingserver exited before it listened:\n%s", logs.String())
	case <-time.After(listenTimeout):
		t.Fatalf("mcptest: dyingserver did not listen within %v:\n%s", listenTimeout, logs.String())
	}
	return nil
}

// Kill kills the server with SIGKILL, as a crash or an OOM kill ends a
// process, and returns once it is gone.
func (s *DyingServer) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}
