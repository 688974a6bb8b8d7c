package mcptest

import (
	"os/exec"
	"testing"
)

// BigServerPkg is test/bigserver: an official Go SDK server whose tool big
// answers {n} bytes of text, and whose tool work never answers, run as a
// process of its own so that what it allocates is not counted in the test
// process's heap, and so that a test can kill it mid-call.
const BigServerPkg = "github.com/caddymcp/caddy-mcp/test/bigserver"

// BuildBigServer builds test/bigserver into a temporary folder and returns
// the binary.
func BuildBigServer(t testing.TB) string {
	t.Helper()
	return buildProgram(t, BigServerPkg)
}

// StartBigServer runs bin (see BuildBigServer), answering event streams
// when sse, else JSON, and returns its endpoint ("http://127.0.0.1:PORT/mcp")
// once it listens. It is stopped by t.Cleanup.
func StartBigServer(t testing.TB, bin string, sse bool) string {
	t.Helper()
	cmd := exec.Command(bin)
	if sse {
		cmd.Args = append(cmd.Args, "-sse")
	}
	return startListening(t, cmd, "bigserver")
}
