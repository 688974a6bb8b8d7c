package mcptest

import (
	"os/exec"
	"testing"
)

// BigServerPkg is test/bigserver: an official Go SDK server whose tool big
// answers {n} bytes of text, and whose tool work never answers, run as a
// process of its own so that what it allocates is not counted in the test
// process's heap (StartBigServer), and so that a test can kill it mid-call
// and start it again (StartKillable with KillableGo).
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

// KillableGo is test/bigserver run by StartKillable: an official Go SDK
// server whose tool work never answers and whose tool echo {text} answers
// the text.
type KillableGo struct {
	// Bin is the binary BuildBigServer returned.
	Bin string
	// SSE answers with event streams rather than JSON.
	SSE bool
	// Stateful keeps the SDK's sessions (Mcp-Session-Id, GET and DELETE)
	// rather than serving each POST alone.
	Stateful bool
	// Events gives each event of a session's streams an id, from the SDK's
	// memory event store, so that a broken stream can be resumed with GET
	// and Last-Event-ID. It needs SSE and Stateful.
	Events bool
}

func (g KillableGo) command(_ testing.TB, addr string) *exec.Cmd {
	cmd := exec.Command(g.Bin, "-addr", addr)
	if g.SSE {
		cmd.Args = append(cmd.Args, "-sse")
	}
	if g.Stateful {
		cmd.Args = append(cmd.Args, "-stateful")
	}
	if g.Events {
		cmd.Args = append(cmd.Args, "-events")
	}
	return cmd
}

func (KillableGo) name() string { return "bigserver" }
