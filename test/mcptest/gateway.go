package mcptest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // the caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddymcp/caddy-mcp" // the mcp directive
)

// Gateway is a real Caddy running in the test process, with the standard
// modules and the mcp plugin, serving one site on a loopback port over plain
// HTTP, and on another over HTTPS with Caddy's internal CA when started by
// StartHTTPSGateway. Caddy holds one running config per process, so a
// package's gateway tests must not run in parallel.
type Gateway struct {
	// URL is the site over plain HTTP: "http://127.0.0.1:PORT".
	URL string
	// HTTPSURL is the site over HTTPS: "https://127.0.0.1:PORT", or "".
	HTTPSURL string
	// Storage is the folder holding Caddy's certificates and CA.
	Storage string
	// AdminURL is Caddy's admin API, "http://127.0.0.1:PORT", when started
	// with GatewayConfig.Admin; otherwise "" (the admin API is off).
	AdminURL string

	adminAddr string
	// global is the Caddyfile without its site, address its site's
	// address.
	global  Caddyfile
	address string
	// handler rewrites the mcp handler's JSON (GatewayConfig.Handler).
	handler func(map[string]any)
}

var gatewayMu sync.Mutex

// StartGateway runs Caddy with site as the body of the site block, e.g.
//
//	mcp { rate_limit l { rate 1/h } }
//	reverse_proxy 127.0.0.1:9000
//
// Caddy is stopped by t.Cleanup. XDG_DATA_HOME and XDG_CONFIG_HOME must point
// at temporary folders (see SetXDGDirs).
func StartGateway(t testing.TB, site string) *Gateway {
	t.Helper()
	return StartGatewayWith(t, GatewayConfig{Site: site})
}

// GatewayConfig is what StartGatewayWith runs.
type GatewayConfig struct {
	// Site is the body of the site block.
	Site string
	// Global is added to the global options block, e.g. a servers block.
	Global string
	// HTTPS serves the site over HTTPS too; StartGatewayWith returns once the
	// site's certificate has been issued by the internal CA.
	HTTPS bool
	// Admin runs Caddy's admin API on a free loopback port (Gateway.AdminURL)
	// instead of turning it off. It is turned off again by t.Cleanup.
	Admin bool
	// Log is the body of the global log block, replacing the default
	// "level ERROR", e.g. "output file /tmp/caddy.log\nformat json\nlevel DEBUG".
	Log string
	// GracePeriod is the global grace_period: how long a reload or stop
	// lets the old server finish its requests in flight. Default: 1ns, so
	// that tests stop at once.
	GracePeriod time.Duration
	// Handler, when set, is given the JSON config of each mcp handler of
	// the site as adapted, and may change it before it loads: for what
	// only JSON says.
	Handler func(map[string]any)
}

// StartGatewayWith runs Caddy as cfg says. Caddy is stopped by t.Cleanup.
func StartGatewayWith(t testing.TB, cfg GatewayConfig) *Gateway {
	t.Helper()
	g := start(t, cfg, false)
	if !cfg.HTTPS {
		return g
	}
	client := g.HTTPSClient(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(g.HTTPSURL + "/")
		if err == nil {
			resp.Body.Close()
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcptest: no certificate for %s: %v", g.HTTPSURL, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start runs Caddy as cfg says, on a site that answers every Host if
// catchAll is set.
func start(t testing.TB, cfg GatewayConfig, catchAll bool) *Gateway {
	t.Helper()
	gatewayMu.Lock()
	httpAddr := FreeLoopbackAddr(t)
	g := &Gateway{URL: "http://" + httpAddr, Storage: t.TempDir(), handler: cfg.Handler}
	g.global = Caddyfile{
		AutoHTTPS: "disable_redirects", GracePeriod: cfg.GracePeriod,
		Storage: g.Storage, Log: cfg.Log, Global: cfg.Global,
	}
	g.address = g.URL
	if catchAll {
		_, port, _ := net.SplitHostPort(httpAddr)
		g.address = "http://:" + port
		g.global.AutoHTTPS, g.global.DefaultBind = "off", "127.0.0.1"
	}
	if cfg.HTTPS {
		g.HTTPSURL = "https://" + FreeLoopbackAddr(t)
		g.address += ", " + g.HTTPSURL
	}
	if cfg.Admin {
		g.adminAddr = FreeLoopbackAddr(t)
		g.AdminURL = "http://" + g.adminAddr
		g.global.Admin = g.adminAddr
	}
	t.Cleanup(func() {
		if g.adminAddr != "" {
			g.stopAdmin(t)
		}
		if err := caddy.Stop(); err != nil {
			t.Errorf("mcptest: stopping caddy: %v", err)
		}
		gatewayMu.Unlock()
	})
	g.Reload(t, cfg.Site)
	return g
}

// Reload replaces the running config with one whose site block body is site,
// as `caddy reload` does. It returns once the old config's servers have
// begun to stop, not once they are gone: send what follows a reload, the
// admin API's requests included, with ResendingClient.
func (g *Gateway) Reload(t testing.TB, site string) {
	t.Helper()
	c := g.global
	c.Sites = []Site{{Address: g.address, Body: site}}
	loadCaddyfile(t, c, g.handler)
}

// stopAdmin turns the admin API off: caddy.Stop stops the config's apps but
// leaves the admin endpoint running until a config without it is loaded.
// It returns once the admin port refuses connections.
func (g *Gateway) stopAdmin(t testing.TB) {
	t.Helper()
	if err := caddy.Load([]byte(`{"admin":{"disabled":true},"logging":{"logs":{"default":{"level":"ERROR"}}}}`), true); err != nil {
		t.Errorf("mcptest: turning the admin API off: %v", err)
		return
	}
	// The old admin server shuts down in the background.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", g.adminAddr, time.Second)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Errorf("mcptest: the admin API on %s is still listening", g.adminAddr)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// HTTPSClient returns a client that trusts the gateway's internal CA.
func (g *Gateway) HTTPSClient(t testing.TB) *http.Client {
	t.Helper()
	root := filepath.Join(g.Storage, "pki", "authorities", "local", "root.crt")
	return HTTPClientWithRoots(t, CertPoolFromPEMFile(t, root))
}

// Main runs a package's tests with SetXDGDirs in effect: call it from
// TestMain.
func Main(m *testing.M) {
	cleanup, err := SetXDGDirs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// SetXDGDirs points XDG_DATA_HOME and XDG_CONFIG_HOME at temporary folders, so
// that Caddy writes nothing under the home directory. Call it from TestMain
// before any gateway starts; it returns a function that removes the folders.
func SetXDGDirs() (cleanup func(), err error) {
	var dirs []string
	for _, v := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME"} {
		dir, err := os.MkdirTemp("", "caddy-mcp-"+strings.ToLower(v))
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
		if err := os.Setenv(v, dir); err != nil {
			return nil, err
		}
	}
	return func() {
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}, nil
}
