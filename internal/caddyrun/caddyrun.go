// Package caddyrun builds the development Caddy (cmd/caddy: the standard
// modules and this plugin) and runs it as processes of their own, each with
// its own Caddyfile, data, config and storage folders and log file, on
// loopback ports. Both benchmark commands (bench and bench/hostile) measure
// Caddy so, never in their own process, and the fleet tests
// (test/fleettest) run several gateways so, as a deployment does.
package caddyrun

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Build builds cmd/caddy into dir, from the module holding the working
// directory, with go build's flags if any (e.g. -race), and returns the
// binary's path.
func Build(dir string, flags ...string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return build(dir, root, "./cmd/caddy", flags)
}

// BuildModule builds the main package of the module at path (relative to
// the caddy-mcp module holding the working directory: a Caddy with more
// plugins, such as bench/peer) into dir, and returns the binary's path.
func BuildModule(dir, path string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return build(dir, filepath.Join(root, path), ".", nil)
}

// moduleRoot is the folder of the module holding the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the caddy-mcp module: run from the repository, or give -caddy")
	}
	return filepath.Dir(gomod), nil
}

// build builds pkg, in the module at moduleDir, into dir/caddy.
func build(dir, moduleDir, pkg string, flags []string) (string, error) {
	bin := filepath.Join(dir, "caddy")
	args := append(append([]string{"build", "-o", bin}, flags...), pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleDir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w", pkg, moduleDir, err)
	}
	return bin, nil
}

// Version is the first word `caddy version` prints.
func Version(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	return v
}

// Process is one Caddy, running as `caddy run`.
type Process struct {
	// Name is what reports call it.
	Name string
	// Addr is the site's host:port; Admin is the admin endpoint's, which
	// serves /debug/vars, /debug/pprof/ and /metrics.
	Addr, Admin string
	// Dir holds the Caddyfile, caddy.log and the data, config and storage
	// folders.
	Dir      string
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
}

// Caddyfile makes the text of a Caddyfile for the site's port, the admin
// port and the storage folder.
type Caddyfile func(port, adminPort int, storage string) string

// Start runs bin with the Caddyfile text makes, in dir (created if need
// be), on free loopback ports. It returns once the site's port accepts
// connections.
func Start(bin, dir, name string, text Caddyfile) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	return StartOn(bin, dir, name, port, adminPort, text)
}

// StartOn is Start on the given site and admin ports, for callers that
// hand out the ports of everything they run themselves, so that no two of
// their processes are given the same one.
func StartOn(bin, dir, name string, port, adminPort int, text Caddyfile) (*Process, error) {
	for _, d := range []string{"data", "config", "storage"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
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
	p := &Process{
		Name:   name,
		Addr:   fmt.Sprintf("127.0.0.1:%d", port),
		Admin:  fmt.Sprintf("127.0.0.1:%d", adminPort),
		Dir:    dir,
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitListening(startLimit); err != nil {
		p.Stop()
		return nil, fmt.Errorf("caddy (%s): %w\n%s", name, err, p.LogTail(4000))
	}
	return p, nil
}

// startLimit bounds how long a process may take to listen: a bound on a
// hang, not a measure. A process that exits is seen at once; one that
// starts is usually listening within a second, but on a machine whose
// cores are all busy, loading the binary and the config can take many
// times that.
const startLimit = time.Minute

func (p *Process) waitListening(limit time.Duration) error {
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

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Alive reports an error if the process has exited (a crash, or the
// kernel's OOM killer).
func (p *Process) Alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("caddy (%s) exited: %s\n%s", p.Name, p.cmd.ProcessState, p.LogTail(2000))
	default:
		return nil
	}
}

// Stop ends Caddy: an interrupt, then a kill if it has not exited in 5 s.
func (p *Process) Stop() {
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

// LogPath is the file Caddy logs to.
func (p *Process) LogPath() string { return filepath.Join(p.Dir, "caddy.log") }

// LogTail is the last n bytes of the log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		return ""
	}
	return string(b[max(0, len(b)-n):])
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Site is a whole Caddyfile: the global options every benchmark Caddy has
// (admin on its own loopback port, no HTTPS, nothing persisted, no grace
// period on reload, logs from level up), then one plain-HTTP site on
// loopback whose directives are site (one per line).
func Site(port, adminPort int, storage, level, site string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	skip_install_trust
	auto_https off
	default_bind 127.0.0.1
	grace_period 1ns
	storage file_system %q
	log {
		level %s
	}
}

http://127.0.0.1:%d {
	%s
}
`, adminPort, storage, level, port, strings.ReplaceAll(site, "\n", "\n\t"))
}
