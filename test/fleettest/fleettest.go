// Package fleettest runs several gateways as Caddy processes of their own,
// as a deployment does: each node has its own memory, ports, folders and
// log, so what they share (rate limits on Redis) is shared through the
// network only, and a node can be stopped or reloaded while the others
// serve. One Caddy runs in a process (see mcptest.Gateway), so such tests
// cannot run their nodes in the test binary.
//
// A package using it calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { fleettest.Main(m) }
package fleettest

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

var (
	// mainRuns is set by Main: only then is the build removed after the
	// tests.
	mainRuns bool

	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// Main runs a package's tests as mcptest.Main does (Caddy's data and config
// folders in temporary folders, for the gateways the test binary runs
// itself), then removes the Caddy that Build built.
func Main(m *testing.M) {
	// The go command that builds the nodes reads the user's settings (go
	// env -w) from the config folder that SetXDGDirs replaces.
	if os.Getenv("GOENV") == "" {
		if dir, err := os.UserConfigDir(); err == nil {
			_ = os.Setenv("GOENV", filepath.Join(dir, "go", "env"))
		}
	}
	cleanup, err := mcptest.SetXDGDirs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if raceEnabled {
		// A race-built program sleeps a second before it exits, in case a
		// report is still being written: a second added to every node's
		// stop, when the reports of races found during a test were written
		// long before. The test binary has read GORACE already: only the
		// nodes see this.
		if err := os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	mainRuns = true
	code := m.Run()
	cleanup()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// Build builds cmd/caddy (the standard modules and this plugin) once per
// test binary, from the working tree, and returns the binary's path. When
// the tests run with -race, so is the build, and a node's data race fails
// its test. It needs Main, which removes the build after the tests.
func Build(t testing.TB) string {
	t.Helper()
	if !mainRuns {
		t.Fatalf("fleettest: call fleettest.Main from TestMain, so that the Caddy it builds is removed after the tests")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "caddy-mcp-fleettest-")
		if buildErr != nil {
			return
		}
		var flags []string
		if raceEnabled {
			flags = append(flags, "-race")
		}
		buildBin, buildErr = caddyrun.Build(buildDir, flags...)
	})
	if buildErr != nil {
		t.Fatalf("fleettest: building Caddy: %v", buildErr)
	}
	return buildBin
}

// Node is one gateway: a Caddy process serving one plain-HTTP site on
// 127.0.0.1, with its admin API on another loopback port.
type Node struct {
	port, adminPort int
	storage         string
	proc            *caddyrun.Process
}

// StartNode runs a Caddy process whose one site has site as its body, e.g.
//
//	mcp { rate_limit l { rate 1/h } }
//	reverse_proxy 127.0.0.1:9000
//
// (the same as mcptest.StartGateway's), and returns once the site's port
// accepts connections. The global options are those of the benchmarks'
// Caddies (caddyrun.Site): no HTTPS, nothing persisted, no grace period on
// reload or stop. t.Cleanup stops it.
func StartNode(t testing.TB, site string) *Node {
	t.Helper()
	return startNode(t, site, "")
}

// StartNodeOn is StartNode with Caddy's storage (file_system) in the
// folder storage instead of one of the node's own, so that nodes given the
// same folder share what Caddy keeps there (session keys, locks), as the
// nodes of a deployment sharing storage do. The folder must outlive the
// nodes: make it (t.TempDir) before starting them.
func StartNodeOn(t testing.TB, site, storage string) *Node {
	t.Helper()
	return startNode(t, site, storage)
}

// startNode is StartNode, on storage when it is not "".
func startNode(t testing.TB, site, storage string) *Node {
	t.Helper()
	bin := Build(t)
	// The folder is made before the cleanup below is registered, so that
	// it is removed after Caddy has stopped writing to it.
	dir := t.TempDir()
	n := &Node{port: freePort(t), adminPort: freePort(t)}
	p, err := caddyrun.StartOn(bin, dir, "node", n.port, n.adminPort, func(port, adminPort int, own string) string {
		n.storage = cmp.Or(storage, own)
		return n.caddyfile(site)
	})
	if err != nil {
		t.Fatalf("fleettest: %v", err)
	}
	n.proc = p
	t.Cleanup(func() {
		n.Stop()
		if strings.Contains(n.Log(), "WARNING: DATA RACE") {
			t.Errorf("fleettest: the node on %s had a data race:\n%s", n.URL(), p.LogTail(1<<16))
		} else if t.Failed() {
			t.Logf("fleettest: log of the node on %s:\n%s", n.URL(), p.LogTail(4000))
		}
	})
	return n
}

// caddyfile is the node's whole Caddyfile with site as its site's body.
func (n *Node) caddyfile(site string) string {
	return caddyrun.Site(n.port, n.adminPort, n.storage, "INFO", site)
}

// freePort is a loopback port no other server of this test binary is given
// (see mcptest.FreeLoopbackAddr), Redis servers included.
func freePort(t testing.TB) int {
	t.Helper()
	_, p, err := net.SplitHostPort(mcptest.FreeLoopbackAddr(t))
	if err != nil {
		t.Fatalf("fleettest: %v", err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("fleettest: %v", err)
	}
	return port
}

// URL is the site, "http://127.0.0.1:PORT".
func (n *Node) URL() string { return "http://" + n.proc.Addr }

// Admin is the admin API, "http://127.0.0.1:PORT": /load, /config/,
// /metrics, /mcp/status.
func (n *Node) Admin() string { return "http://" + n.proc.Admin }

// Log is what Caddy has logged so far (level INFO and up).
func (n *Node) Log() string { return n.proc.LogTail(1 << 30) }

// Stop ends the node, as an operator's stop does (SIGINT, then a kill if
// it has not exited in 5 seconds), and returns once it has exited. Stopping
// a stopped node does nothing.
func (n *Node) Stop() { n.proc.Stop() }

// Reload replaces the node's config with one whose site has site as its
// body, through the admin API as `caddy reload --force` does: the same
// config is loaded again too. It returns once the new config serves.
func (n *Node) Reload(t testing.TB, site string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.Admin()+"/load", strings.NewReader(n.caddyfile(site)))
	if err != nil {
		t.Fatalf("fleettest: %v", err)
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	// Without it, a config equal to the running one is not loaded again.
	req.Header.Set("Cache-Control", "must-revalidate")
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("fleettest: reloading the node on %s: %v", n.URL(), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("fleettest: reloading the node on %s: %s: %s", n.URL(), resp.Status, body)
	}
}
