package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// buildCaddy builds the development Caddy (cmd/caddy: the standard modules
// and this plugin) into dir, from the module holding the working directory.
func buildCaddy(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the caddy-mcp module: run the benchmark from the repository")
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

// caddyVersion returns the first word `caddy version` prints.
func caddyVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	return v
}

// caddyProcess is one configuration's Caddy, running as `caddy run` with
// its own Caddyfile, data and config folders, and log file.
type caddyProcess struct {
	// Addr is the site's host:port; Admin is the admin endpoint's, which
	// serves /debug/pprof/.
	Addr, Admin string
	dir         string
	cmd         *exec.Cmd
	exited      chan struct{}
	stopping    atomic.Bool
}

// startCaddy writes c's Caddyfile and runs Caddy with it, proxying to
// upstream. It returns once the site's port accepts connections.
func startCaddy(bin, root string, c config, upstream string) (*caddyProcess, error) {
	dir := filepath.Join(root, c.Name)
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
	text := caddyfile(c, port, adminPort, filepath.Join(dir, "storage"), upstream)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
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
		return nil, fmt.Errorf("starting caddy for %s: %w", c.Name, err)
	}
	p := &caddyProcess{
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
		return nil, fmt.Errorf("caddy for %s: %w\n%s", c.Name, err, p.logTail())
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

// alive reports an error if the process has exited.
func (p *caddyProcess) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("caddy exited\n%s", p.logTail())
	default:
		return nil
	}
}

// stop ends Caddy: an interrupt, then a kill if it has not exited in 5 s.
func (p *caddyProcess) stop() {
	if !p.stopping.CompareAndSwap(false, true) {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *caddyProcess) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.dir, "caddy.log"))
	if err != nil {
		return ""
	}
	const tail = 4000
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	return string(b)
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
