// Package mcptest holds helpers for caddy-mcp integration tests: starting the
// demo MCP server (examples/demo/demoserver) on a loopback port, running the
// official TypeScript SDK client (test/tsclient/client.mjs) with a JSON
// script, or a server written with that SDK (test/tsclient/server.mjs), and
// building HTTP clients that trust a test CA.
//
// The TypeScript client and server need their dependencies installed once:
//
//	npm ci --prefix test/tsclient
package mcptest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
)

// MCPPath is the path at which StartDemoServer and ServeMCP mount the handler.
const MCPPath = "/mcp"

// StartDemoServer serves demoserver.Handler() on a free 127.0.0.1 port at
// path /mcp and returns the endpoint URL ("http://127.0.0.1:PORT/mcp"). The
// server is stopped by t.Cleanup.
func StartDemoServer(t testing.TB) (url string) {
	t.Helper()
	return ServeMCP(t, demoserver.Handler())
}

// ServeMCP serves h on a free 127.0.0.1 port at path /mcp (other paths get
// 404) and returns the endpoint URL. The server is stopped by t.Cleanup: open
// connections (e.g. hanging GET SSE streams of sessions the test did not
// close) are closed forcibly, then it waits for running handlers (note that
// the Go SDK does not cancel a tool handler when its POST is aborted, so a
// long "slow" call that was not cancelled with notifications/cancelled delays
// the cleanup until it finishes).
func ServeMCP(t testing.TB, h http.Handler) (url string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(MCPPath, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + MCPPath
}

// ServeMCPTLS is like ServeMCP but serves HTTPS (HTTP/1.1 and HTTP/2) with
// httptest's self-signed certificate, valid for 127.0.0.1, ::1 and
// example.com. It returns the endpoint URL ("https://127.0.0.1:PORT/mcp") and
// the path of a PEM file holding that certificate, usable as TSScript.CAFile
// or with CertPoolFromPEMFile.
func ServeMCPTLS(t testing.TB, h http.Handler) (url, caPEMFile string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(MCPPath, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	caPEMFile = filepath.Join(t.TempDir(), "ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caPEMFile, block, 0o600); err != nil {
		t.Fatalf("mcptest: writing CA file: %v", err)
	}
	return srv.URL + MCPPath, caPEMFile
}

var (
	portsMu sync.Mutex
	// ports are those FreeLoopbackAddr has handed out in this process.
	ports = make(map[int]bool)
)

// FreeLoopbackAddr returns a "127.0.0.1:PORT" address that was free when the
// function returned, and that it has not returned before in this process
// nor in any other test process of this machine (see claimPort): addresses
// taken one after the other for the sites of one config, or for a site and
// an address where nothing listens, are distinct, and two packages' tests
// that run at once never get one port. The listener is closed again, so a
// process that does not claim its ports could still grab it.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	// A port already handed out is kept listening while the next is
	// asked for, so that the system does not give it again.
	var taken []net.Listener
	defer func() {
		for _, ln := range taken {
			_ = ln.Close()
		}
	}()
	for range 1000 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("mcptest: listen: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if ports[port] || !claimPort(port) {
			taken = append(taken, ln)
			continue
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatalf("mcptest: close listener: %v", err)
		}
		ports[port] = true
		return addr
	}
	t.Fatalf("mcptest: no loopback port left that was not handed out before")
	return ""
}

// claimed are the lock files of the ports this process claimed, open until
// it ends.
var claimed []*os.File

// claimPort reports whether this process may take port: no other test
// process of this machine took it. Caddy listens with SO_REUSEPORT, so two
// processes' gateways given one port would both bind it, and the kernel
// would split connections between them; a port found free, then closed,
// may be found free by another process before the first binds it. The
// claim is an exclusive lock on a file named after the port, held until
// the process ends. Where locks cannot be taken, every port may be.
func claimPort(port int) bool {
	dir := filepath.Join(os.TempDir(), "caddy-mcp-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	claimed = append(claimed, f)
	return true
}

// CertPoolFromPEMFile returns a pool holding the PEM certificates of file
// (e.g. Caddy's local CA root, <data dir>/pki/authorities/local/root.crt).
func CertPoolFromPEMFile(t testing.TB, file string) *x509.CertPool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("mcptest: reading CA file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatalf("mcptest: no PEM certificate found in %s", file)
	}
	return pool
}

// HTTPClientWithRoots returns an *http.Client (a clone of
// http.DefaultTransport, so HTTP/2 is attempted) that trusts only roots for
// TLS server certificates. Pass it as mcp.StreamableClientTransport.HTTPClient.
// Idle connections are closed by t.Cleanup.
func HTTPClientWithRoots(t testing.TB, roots *x509.CertPool) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

var (
	repoRootOnce sync.Once
	repoRoot     string
	repoRootErr  error
)

// RepoRoot returns the module root: the nearest ancestor of the working
// directory that contains go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	repoRootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			repoRootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				repoRoot = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				repoRootErr = os.ErrNotExist
				return
			}
			dir = parent
		}
	})
	if repoRootErr != nil {
		t.Fatalf("mcptest: cannot find the repository root (go.mod) above the working directory: %v", repoRootErr)
	}
	return repoRoot
}
