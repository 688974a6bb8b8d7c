package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// buildCaddy builds the development Caddy (cmd/caddy: the standard modules
// and this plugin) into dir, from the module holding the working directory,
// as bench does.
func buildCaddy(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the caddy-mcp module: run from the repository, or give -caddy")
	}
	bin := filepath.Join(dir, "caddy")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/caddy")
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/caddy: %w", err)
	}
	return bin, nil
}

// caddyProcess is one Caddy, running as `caddy run` with its own Caddyfile,
// data and config folders, and log file. Every scenario starts its own, so
// that one scenario's garbage or buckets never show in another's figures.
type caddyProcess struct {
	// Name is what the report calls it: "mcp" or "reverse_proxy".
	Name string
	// Addr is the site's host:port; Admin is the admin endpoint's, which
	// serves /debug/vars, /debug/pprof/ and /metrics.
	Addr, Admin string
	dir         string
	cmd         *exec.Cmd
	exited      chan struct{}
	stopOnce    sync.Once
}

// caddyfile is a whole Caddyfile: admin on its own loopback port, no HTTPS,
// logs at INFO (the mcp handler logs its envelopes there), one plain-HTTP
// site on loopback, and mcpBlock (an `mcp { … }` directive, or "" for a
// plain reverse_proxy) before the same reverse_proxy every process has.
func caddyfile(port, adminPort int, storage, mcpBlock, upstream string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	skip_install_trust
	auto_https off
	default_bind 127.0.0.1
	grace_period 1ns
	storage file_system %q
	log {
		level INFO
	}
}

http://127.0.0.1:%d {
	%s
	reverse_proxy %s {
		header_up Host {upstream_hostport}
	}
}
`, adminPort, storage, port, strings.ReplaceAll(mcpBlock, "\n", "\n\t"), upstream)
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

// startCaddyWith is startCaddy with the Caddyfile text made by text, for the
// site's port, the admin port and the storage folder.
func startCaddyWith(bin, root, name string, text func(port, adminPort int, storage string) string) (*caddyProcess, error) {
	dir, err := os.MkdirTemp(root, name+"-")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"data", "config", "storage"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(text(port, adminPort, filepath.Join(dir, "storage"))), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "caddy.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting caddy (%s): %w", name, err)
	}
	p := &caddyProcess{
		Name:   name,
		Addr:   fmt.Sprintf("127.0.0.1:%d", port),
		Admin:  fmt.Sprintf("127.0.0.1:%d", adminPort),
		dir:    dir,
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitListening(15 * time.Second); err != nil {
		p.stop()
		return nil, fmt.Errorf("caddy (%s): %w\n%s", name, err, p.logTail(4000))
	}
	return p, nil
}

func (p *caddyProcess) waitListening(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-p.exited:
			return errors.New("exited before listening")
		default:
		}
		conn, err := net.DialTimeout("tcp", p.Addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %s: %w", p.Addr, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports an error if the process has exited (a crash, or the
// kernel's OOM killer).
func (p *caddyProcess) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("caddy (%s) exited: %s\n%s", p.Name, p.cmd.ProcessState, p.logTail(2000))
	default:
		return nil
	}
}

// stop ends Caddy: an interrupt, then a kill if it has not exited in 5 s.
func (p *caddyProcess) stop() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

func (p *caddyProcess) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(p.dir, "caddy.log"))
	if err != nil {
		return ""
	}
	return string(b[max(0, len(b)-n):])
}

// logLines returns the log lines holding sub, each cut to width bytes: an
// envelope's log line carries the request's id, which a hostile client can
// make megabytes long.
func (p *caddyProcess) logLines(sub string, width int) []string {
	f, err := os.Open(filepath.Join(p.dir, "caddy.log"))
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

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
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
