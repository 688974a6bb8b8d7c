package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// caddyProcess is one Caddy, with what the scenarios read of it. Every
// scenario starts its own, so that one scenario's garbage or buckets never
// show in another's figures.
type caddyProcess struct{ *caddyrun.Process }

// caddyfile is a whole Caddyfile: admin on its own loopback port, no HTTPS,
// logs at INFO (the mcp handler logs its envelopes there), one plain-HTTP
// site on loopback, and mcpBlock (an `mcp { … }` directive, or "" for a
// plain reverse_proxy) before the same reverse_proxy every process has.
func caddyfile(port, adminPort int, storage, mcpBlock, upstream string) string {
	site := "reverse_proxy " + upstream + " {\n\theader_up Host {upstream_hostport}\n}"
	if mcpBlock != "" {
		site = mcpBlock + "\n" + site
	}
	return caddyrun.Site(port, adminPort, storage, "INFO", site)
}

// knows reports whether bin's mcp directive takes the given line, so that a
// scenario can use an option that older builds lack.
func knows(bin, line string) bool {
	dir, err := os.MkdirTemp("", "caddy-mcp-knows-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "Caddyfile")
	text := "http://127.0.0.1:1 {\n\tmcp {\n\t\t" + line + "\n\t}\n\treverse_proxy 127.0.0.1:2\n}\n"
	if os.WriteFile(file, []byte(text), 0o644) != nil {
		return false
	}
	cmd := exec.Command(bin, "adapt", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	return cmd.Run() == nil
}

// startCaddy runs bin with a Caddyfile of its own under root/name: one site
// with mcpBlock before its reverse_proxy to upstream. It returns once the
// site's port accepts connections.
func startCaddy(bin, root, name, mcpBlock, upstream string) (*caddyProcess, error) {
	return startCaddyWith(bin, root, name, func(port, adminPort int, storage string) string {
		return caddyfile(port, adminPort, storage, mcpBlock, upstream)
	})
}

// startCaddyWith is startCaddy with the Caddyfile text makes.
func startCaddyWith(bin, root, name string, text caddyrun.Caddyfile) (*caddyProcess, error) {
	dir, err := os.MkdirTemp(root, name+"-")
	if err != nil {
		return nil, err
	}
	p, err := caddyrun.Start(bin, dir, name, text)
	if err != nil {
		return nil, err
	}
	return &caddyProcess{p}, nil
}

// logLines returns the log lines holding sub, each cut to width bytes: an
// envelope's log line carries the request's id, which a hostile client can
// make megabytes long.
func (p *caddyProcess) logLines(sub string, width int) []string {
	f, err := os.Open(p.LogPath())
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if strings.Contains(line, sub) {
			lines = append(lines, cut(strings.TrimSpace(line), width))
		}
		if err != nil {
			return lines
		}
	}
}

// admin is the client for the admin endpoint; its requests are small and
// must not wait behind a scenario's traffic.
var admin = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}

func (p *caddyProcess) adminGet(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := admin.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", path, resp.Status, cut(string(b), 200))
	}
	return b, err
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
