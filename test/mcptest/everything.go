package mcptest

import (
	"net"
	"os/exec"
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
	return buildProgram(t, EverythingServerPkg)
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
	exited := startProcess(t, cmd, "everything-server", &logs)

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
