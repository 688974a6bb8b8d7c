package mcptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// KillableProgram is an MCP server program StartKillable runs:
// KillableGo or KillableTS.
type KillableProgram interface {
	// command returns the command that runs the program listening on
	// addr ("127.0.0.1:PORT") and printing its endpoint once it does.
	command(t testing.TB, addr string) *exec.Cmd
	// name names the program in failures.
	name() string
}

// KillableServer is an MCP server run as a process of its own, whose tool
// work never answers, that a test kills in the middle of a call and
// starts again on the same port, as a crash and a supervisor's restart
// would: the new process knows none of the sessions of the one before.
type KillableServer struct {
	// URL is its endpoint, "http://127.0.0.1:PORT/mcp", the same after
	// every Restart.
	URL string
	// Called receives a value each time a call of the tool work begins,
	// in any of the server's processes.
	Called <-chan struct{}

	program KillableProgram
	addr    string
	called  chan<- struct{}
	// done is closed when the test ends: a process's output is no longer
	// waited to be read from Called.
	done chan struct{}
	// logs is what every process of the server wrote on stderr.
	logs lockedBuffer
	// portTaken, when set, is called each time a process could not bind
	// the port, before the next is started.
	portTaken func()

	mu      sync.Mutex
	running *serverProcess // nil while killed
}

// serverProcess is one process of a KillableServer.
type serverProcess struct {
	cmd    *exec.Cmd
	exited <-chan struct{}
}

// bindRetry is the pause before a server whose port was taken is started
// again: the port is freed by another process, with no event to wait for.
const bindRetry = 50 * time.Millisecond

// errPortTaken is a process's failure to bind its port (EADDRINUSE).
var errPortTaken = errors.New("its port is taken")

// StartKillable runs program on a port of its own (FreeLoopbackAddr) and
// returns once it listens. It is killed by t.Cleanup, and what each of its
// processes wrote on stderr logged if the test failed.
//
//	server := mcptest.StartKillable(t, mcptest.KillableGo{Bin: bin, SSE: true, Stateful: true, Events: true})
//	<-server.Called // a call of work reached it
//	server.Kill()
//	server.Restart(t)
func StartKillable(t testing.TB, program KillableProgram) *KillableServer {
	t.Helper()
	addr := FreeLoopbackAddr(t)
	called := make(chan struct{}, 64)
	s := &KillableServer{
		URL:     "http://" + addr + MCPPath,
		Called:  called,
		program: program,
		addr:    addr,
		called:  called,
		done:    make(chan struct{}),
	}
	t.Cleanup(func() {
		s.Kill()
		close(s.done)
		if t.Failed() {
			t.Logf("%s's output:\n%s", program.name(), s.logs.String())
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = s.listen(t)
	return s
}

// Kill kills the server with SIGKILL, as a crash or an OOM kill ends a
// process, and returns once it is gone: the system closes its
// connections, its streams end without their answers. Killing a killed
// server does nothing.
func (s *KillableServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

func (s *KillableServer) kill() {
	if s.running != nil {
		s.running.kill()
		s.running = nil
	}
}

func (p *serverProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Restart starts the program again on the server's port, after killing it
// if it still runs, and returns once it listens at URL. The port is
// bound with SO_REUSEADDR, as Go and Node bind, so connections of the
// process before in TIME_WAIT do not hold it; while another socket holds
// it, the program is started again until it binds it (listenTimeout).
func (s *KillableServer) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	s.running = s.listen(t)
}

// listen starts processes of the server until one listens.
func (s *KillableServer) listen(t testing.TB) *serverProcess {
	t.Helper()
	deadline := time.Now().Add(listenTimeout)
	for {
		p, err := s.start(t)
		if err == nil {
			return p
		}
		if !errors.Is(err, errPortTaken) || time.Now().After(deadline) {
			t.Fatalf("mcptest: %s on %s: %v (its output is logged below)", s.program.name(), s.addr, err)
		}
		if s.portTaken != nil {
			s.portTaken()
		}
		<-time.After(bindRetry)
	}
}

// start runs one process of the server and returns it once it listens,
// or the reason why it did not.
func (s *KillableServer) start(t testing.TB) (*serverProcess, error) {
	t.Helper()
	cmd := s.program.command(t, s.addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd.Stderr = io.MultiWriter(&s.logs, &logs)
	// The programs exit when their standard input closes: none outlives
	// a test process killed before its cleanups ran.
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	exited, err := launch(cmd)
	if err != nil {
		t.Fatalf("mcptest: starting %s: %v", s.program.name(), err)
	}
	p := &serverProcess{cmd: cmd, exited: exited}
	listening := make(chan string, 1)
	go s.readOutput(out, listening)
	select {
	case endpoint := <-listening:
		if endpoint != s.URL {
			p.kill()
			return nil, fmt.Errorf("it printed %q, not its endpoint %s", endpoint, s.URL)
		}
		return p, nil
	case <-exited:
		if strings.Contains(logs.String(), "address already in use") {
			return nil, errPortTaken
		}
		return nil, fmt.Errorf("it exited before it listened (%v)", cmd.ProcessState)
	case <-time.After(listenTimeout):
		p.kill()
		return nil, fmt.Errorf("it did not listen within %v", listenTimeout)
	}
}

// readOutput hands over the first line of a process's standard output,
// its endpoint, then sends a value to Called for each line "called".
func (s *KillableServer) readOutput(out io.Reader, listening chan<- string) {
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		return
	}
	listening <- strings.TrimSpace(lines.Text())
	for lines.Scan() {
		if lines.Text() != "called" {
			continue
		}
		select {
		case s.called <- struct{}{}:
		case <-s.done:
			return
		}
	}
}
