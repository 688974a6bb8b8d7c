package mcptest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
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
