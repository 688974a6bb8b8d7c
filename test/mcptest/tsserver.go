package mcptest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// StartTSServer runs test/tsclient/server.mjs, an MCP server written with
// the official TypeScript SDK (stateless; tools big, failing, picture,
// table, blocks and paged: see the script), on a free loopback port, and
// returns its endpoint, "http://127.0.0.1:PORT/mcp". It answers each POST
// with one JSON body when jsonAnswers is set, with an event stream
// otherwise. It is stopped by t.Cleanup, and what it wrote on its standard
// error logged if the test failed.
func StartTSServer(t testing.TB, jsonAnswers bool) (url string) {
	t.Helper()
	dir := TSClientDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("mcptest: node (Node.js >= 20) not found in PATH: %v", err)
	}
	// Port 0: node listens on a port the system picks and prints it.
	options := fmt.Sprintf(`{"port":0,"json":%t}`, jsonAnswers)
	cmd := exec.Command(node, filepath.Join(dir, "server.mjs"), options)
	cmd.Dir = dir
	url = startListening(t, cmd, "the TypeScript server")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, MCPPath) {
		t.Fatalf("mcptest: the TypeScript server printed %q, not its endpoint", url)
	}
	return url
}
