// Command demo runs the gateway in front of the demo MCP server on this
// machine: Caddy with the mcp handler, configured by examples/Caddyfile, on
// https://localhost:8443/mcp, and the MCP server on a free loopback port.
//
//	go run ./examples/demo
//
// It prints curl commands that show a normal call and a rate-limited one, and
// runs until interrupted.
package main

import (
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
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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
	if err := caddy.Load(cfg, true); err != nil {
		return err
	}
	defer caddy.Stop() //nolint:errcheck // exiting anyway

	printUsage(upstream, caddyfile)
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

func printUsage(upstream, caddyfile string) {
	root := filepath.Join(caddy.AppDataDir(), "pki", "authorities", "local", "root.crt")
	fmt.Printf(`
caddy-mcp demo
  gateway:     https://localhost:8443/mcp   (Caddy, %s)
  MCP server:  http://%s/mcp   (tools: echo, add, count, slow)
  CA root:     %s

Call a tool through the gateway (run it 4 times: the 4th is RATE_LIMITED):

  curl -sS --cacert %s \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}' \
    https://localhost:8443/mcp

Press Ctrl-C to stop.
`, caddyfile, upstream, root, root)
}
