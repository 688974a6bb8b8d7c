// Command demo runs the gateway in front of the demo MCP server on this
// machine: Caddy with the mcp handler, configured by examples/Caddyfile, on
// https://localhost:8443/mcp, and the MCP server on a free loopback port.
//
//	go run ./examples/demo
//
// It prints where each runs, and a curl command that calls a tool through
// the gateway, and runs until interrupted. With -caddyfile, Caddy runs
// another Caddyfile in front of the demo MCP server instead; one that
// serves no site (a global options block alone) leaves the MCP server
// running alone.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "github.com/caddymcp/caddy-mcp"
	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
)

func main() {
	caddyfile := flag.String("caddyfile", filepath.Join("examples", "Caddyfile"), "the Caddyfile to run")
	flag.Parse()
	if err := run(*caddyfile); err != nil {
		log.Fatal(err)
	}
}

func run(caddyfile string) error {
	upstream, stopUpstream, err := serveDemo()
	if err != nil {
		return err
	}
	defer stopUpstream()

	if err := os.Setenv("MCP_UPSTREAM", upstream); err != nil {
		return err
	}
	text, err := os.ReadFile(caddyfile)
	if err != nil {
		return fmt.Errorf("%w (run the demo from the repository's root)", err)
	}
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(text, map[string]any{"filename": caddyfile})
	if err != nil {
		return err
	}
	gateways, err := gatewayURLs(caddyfile, text)
	if err != nil {
		return err
	}
	if err := caddy.Load(cfg, true); err != nil {
		return err
	}
	defer caddy.Stop() //nolint:errcheck // exiting anyway

	printUsage(upstream, caddyfile, gateways)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

// serveDemo serves the demo MCP server on a free loopback port. It runs
// stateless, so that a single curl request can call a tool without an
// initialize handshake first; MCP clients work with it as with any server.
func serveDemo() (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s := demoserver.New()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Print(err)
		}
	}()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// gatewayURLs are the MCP endpoints the sites of a Caddyfile serve: each
// site address as a URL, /mcp its path (the demo server answers on any).
// A Caddyfile without a site (a global options block alone) serves none.
func gatewayURLs(filename string, text []byte) ([]string, error) {
	blocks, err := caddyfile.Parse(filename, text)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, b := range blocks {
		if b.IsNamedRoute {
			continue
		}
		for _, key := range b.GetKeysText() {
			if strings.HasPrefix(key, "(") {
				break // a snippet
			}
			a, err := httpcaddyfile.ParseAddress(key)
			if err != nil {
				return nil, err
			}
			urls = append(urls, siteURL(a))
		}
	}
	return urls, nil
}

// siteURL is the URL a client calls for a site address: HTTPS unless the
// address says HTTP, port 80, or names no host (Caddy has no name to get
// a certificate for).
func siteURL(a httpcaddyfile.Address) string {
	scheme := a.Scheme
	if scheme == "" {
		scheme = "https"
		if a.Port == "80" || (a.Host == "" && a.Port != "443") {
			scheme = "http"
		}
	}
	host := cmp.Or(a.Host, "localhost")
	if a.Port != "" && !(scheme == "https" && a.Port == "443") && !(scheme == "http" && a.Port == "80") {
		host = net.JoinHostPort(host, a.Port)
	}
	return scheme + "://" + host + cmp.Or(strings.TrimSuffix(a.Path, "*"), "/") + "mcp"
}

func printUsage(upstream, caddyfile string, gateways []string) {
	root := filepath.Join(caddy.AppDataDir(), "pki", "authorities", "local", "root.crt")
	fmt.Printf("\ncaddy-mcp demo\n")
	if len(gateways) == 0 {
		fmt.Printf("  gateway:     none (%s serves no site)\n", caddyfile)
	}
	for _, g := range gateways {
		fmt.Printf("  gateway:     %s   (Caddy, %s)\n", g, caddyfile)
	}
	fmt.Printf("  MCP server:  http://%s/mcp   (tools: echo, add, count, slow)\n", upstream)
	if len(gateways) == 0 {
		fmt.Printf("\nPress Ctrl-C to stop.\n")
		return
	}
	fmt.Printf(`  CA root:     %s

Call a tool through the gateway (with examples/Caddyfile, the 4th call
within a minute is RATE_LIMITED):

  curl -sS --cacert %s \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}' \
    %s

Press Ctrl-C to stop.
`, root, root, gateways[0])
}
