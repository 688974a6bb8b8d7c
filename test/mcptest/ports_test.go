package mcptest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A port another test process of this machine claimed is not handed out
// here while that process lives (its gateway would share it: Caddy
// listens with SO_REUSEPORT), and is free to take once it ended.
func TestAPortAnotherProcessClaimedIsNotTakenWhileItLives(t *testing.T) {
	if port := os.Getenv("MCPTEST_CLAIM_PORT"); port != "" {
		n, _ := strconv.Atoi(port)
		if !claimPort(n) {
			t.Fatal("the child could not claim the port")
		}
		fmt.Println("claimed")
		_, _ = io.ReadAll(os.Stdin) // until the parent is done
		return
	}
	ln, port := unclaimedPort(t)
	// Held until the test ends, so that no other process is given the port
	// (and claims it) meanwhile.
	defer ln.Close()
	child := exec.Command(os.Args[0], "-test.run=^TestAPortAnotherProcessClaimedIsNotTakenWhileItLives$")
	child.Env = append(os.Environ(), "MCPTEST_CLAIM_PORT="+strconv.Itoa(port))
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, _ := bufio.NewReader(out).ReadString('\n')
	require.Equal(t, "claimed\n", line)
	assert.False(t, claimPort(port), "claimed by the child")
	require.NoError(t, stdin.Close())
	_ = child.Wait()
	assert.True(t, claimPort(port), "free once the child ended")
}

// A server started again while another socket holds its port (a listener
// here; a connection another process made from that port, on a busy
// machine) is started again until it binds the port, rather than failing
// the test.
func TestARestartWaitsUntilItsPortIsFree(t *testing.T) {
	programs := map[string]KillableProgram{"go": KillableGo{Bin: BuildBigServer(t)}, "ts": KillableTS{}}
	for name, program := range programs {
		t.Run(name, func(t *testing.T) {
			server := StartKillable(t, program)
			server.Kill()
			holder, err := net.Listen("tcp", server.addr)
			require.NoError(t, err)
			taken := 0
			server.portTaken = func() {
				taken++
				assert.NoError(t, holder.Close())
			}
			server.Restart(t)
			assert.Equal(t, 1, taken, "the first process found its port taken, the second bound it")
			res, err := http.Get(server.URL)
			require.NoError(t, err)
			_ = res.Body.Close()
			assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode, "the server listens: a stateless one refuses GET")
		})
	}
}

// unclaimedPort is a port the kernel gave a listener here and that no
// process has claimed: a port number can come back from the kernel while
// a live test process that used it once still holds its claim.
func unclaimedPort(t *testing.T) (net.Listener, int) {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		if !claimedElsewhere(t, port) {
			return ln, port
		}
		require.NoError(t, ln.Close())
	}
	t.Fatal("every port the kernel gave was claimed by another process")
	return nil, 0
}

// claimedElsewhere reports whether another process holds port's claim,
// without claiming it.
func claimedElsewhere(t *testing.T, port int) bool {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "caddy-mcp-test-ports")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) != nil
}
