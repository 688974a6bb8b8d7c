package mcptest

import (
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// StartTSServer runs test/tsclient/server.mjs, an MCP server written with
// the official TypeScript SDK (stateless; tools echo, work, big, failing,
// picture, table, blocks and paged: see the script), on a free loopback
// port, and returns its endpoint, "http://127.0.0.1:PORT/mcp". It answers
// each POST with one JSON body when jsonAnswers is set, with an event
// stream otherwise. It is stopped by t.Cleanup, and what it wrote on its
// standard error logged if the test failed.
func StartTSServer(t testing.TB, jsonAnswers bool) (url string) {
	t.Helper()
	// Port 0: node listens on a port the system picks and prints it.
	cmd := tsServerCommand(t, tsServerOptions{JSON: jsonAnswers})
	url = startListening(t, cmd, "the TypeScript server")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, MCPPath) {
		t.Fatalf("mcptest: the TypeScript server printed %q, not its endpoint", url)
	}
	return url
}

// KillableTS is test/tsclient/server.mjs run by StartKillable: a server
// written with the official TypeScript SDK, whose tool work never answers
// and whose tool echo {text} answers the text.
type KillableTS struct {
	// JSON answers each POST with one JSON body rather than an event
	// stream.
	JSON bool
	// Stateful keeps sessions as the SDK's examples do (one transport per
	// Mcp-Session-Id, GET and DELETE served, 404 "Session not found" for
	// an unknown id) rather than serving each POST alone.
	Stateful bool
	// Events gives each event of a session's streams an id, from the SDK's
	// examples' InMemoryEventStore, so that a broken stream can be resumed
	// with GET and Last-Event-ID. It needs Stateful.
	Events bool
}

func (s KillableTS) command(t testing.TB, addr string) *exec.Cmd {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return tsServerCommand(t, tsServerOptions{Port: n, JSON: s.JSON, Stateful: s.Stateful, Events: s.Events})
}

func (KillableTS) name() string { return "the TypeScript server" }

// tsServerOptions are the options server.mjs reads (see the script).
type tsServerOptions struct {
	Port     int  `json:"port"`
	JSON     bool `json:"json"`
	Stateful bool `json:"stateful,omitempty"`
	Events   bool `json:"events,omitempty"`
}

// tsServerCommand returns the command that runs server.mjs with options.
func tsServerCommand(t testing.TB, options tsServerOptions) *exec.Cmd {
	t.Helper()
	dir := TSClientDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("mcptest: node (Node.js >= 20) not found in PATH: %v", err)
	}
	arg, err := json.Marshal(options)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "server.mjs"), string(arg))
	cmd.Dir = dir
	return cmd
}
