// Command release builds a release Caddy binary with xcaddy, as pinned by
// xcaddy.json: the Caddy version, the xcaddy version, and the plugin list
// (this plugin from the local checkout by default).
//
//	go run ./cmd/release
//
// A plugin's "replace" is a local path or a version; without one, xcaddy
// fetches the module's latest release. This plugin from this checkout is
// built at the checkout's version (see commit.version), so that `caddy
// list-modules --versions` and /mcp/status say which source a binary
// holds: for a local directory named with no version, Go records the
// placeholder v0.0.0-00010101000000-000000000000.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/caddymcp/caddy-mcp/internal/version"
)

// manifest is the content of xcaddy.json.
type manifest struct {
	// Xcaddy is the xcaddy command as `go run` takes it, with its version.
	Xcaddy string `json:"xcaddy"`
	// Caddy is the Caddy version to build.
	Caddy string `json:"caddy"`
	// Plugins are the modules built in, besides Caddy's standard ones.
	Plugins []struct {
		Module  string `json:"module"`
		Replace string `json:"replace,omitempty"`
	} `json:"plugins"`
	// Output is where the binary is written.
	Output string `json:"output"`
}

func main() {
	file := flag.String("manifest", "xcaddy.json", "the build manifest")
	flag.Parse()
	if err := build(*file); err != nil {
		log.Fatal(err)
	}
}

func build(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if m.Xcaddy == "" || m.Caddy == "" || m.Output == "" {
		return errors.New(file + ": xcaddy, caddy and output are required")
	}
	output, err := filepath.Abs(m.Output)
	if err != nil {
		return err
	}
	args := []string{"run", m.Xcaddy, "build", m.Caddy, "--output", output}
	for _, p := range m.Plugins {
		with, err := withArg(p.Module, p.Replace)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		args = append(args, "--with", with)
	}
	proxy, err := notFoundFallbackProxy()
	if err != nil {
		return err
	}
	defer os.RemoveAll(proxy.emptyDir)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOPROXY="+proxy.value)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	log.Printf("go %q", args)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("xcaddy: %w", err)
	}
	log.Printf("built %s", output)
	return nil
}

// withArg is xcaddy's --with argument for a plugin: module@version, or
// module=dir for a local directory; module@version=dir for this plugin
// from this checkout.
func withArg(module, replace string) (string, error) {
	switch {
	case replace == "":
		return module, nil
	case replace[0] != '.' && !filepath.IsAbs(replace):
		return module + "@" + replace, nil
	}
	dir, err := filepath.Abs(replace)
	if err != nil {
		return "", err
	}
	if module != version.ModulePath {
		return module + "=" + dir, nil
	}
	here, err := os.Getwd()
	if err != nil {
		return "", err
	}
	// Release is the version of the source this command was built from:
	// another checkout may be of another version.
	if dir != here {
		return "", fmt.Errorf("%s is replaced by %s: the one checkout whose version this command knows is this one (.)", module, replace)
	}
	v, err := checkoutVersion(dir)
	if err != nil {
		return "", err
	}
	return module + "@" + v + "=" + dir, nil
}

// checkoutVersion is the version of the caddy-mcp checkout in dir, whose
// source is version.Release: Release outside git (a source archive).
func checkoutVersion(dir string) (string, error) {
	c, err := headCommit(dir)
	if err != nil {
		log.Printf("%v: naming the plugin %s", err, version.Release)
		return version.Release, nil
	}
	v, err := c.version(version.Release)
	if err != nil {
		return "", err
	}
	log.Printf("%s is %s (commit %s)", version.ModulePath, v, c.hash)
	if c.dirty {
		log.Printf("warning: %s has changes not committed: the binary holds them, and says %s all the same", dir, v)
	}
	return v, nil
}

type goproxy struct {
	value    string
	emptyDir string
}

// notFoundFallbackProxy returns a GOPROXY for xcaddy. xcaddy runs `go get`
// on every plugin, this one included, although it is replaced by the local
// checkout; that works only if the module proxy answers "not found" for an
// unpublished module. Some proxies answer 403 instead, which `go get` takes
// as fatal. So the configured proxies are chained with "|" (fall through on
// any error) and end in an empty file proxy, whose answer is "not found".
func notFoundFallbackProxy() (goproxy, error) {
	out, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		return goproxy{}, fmt.Errorf("go env GOPROXY: %w", err)
	}
	empty, err := os.MkdirTemp("", "empty-goproxy")
	if err != nil {
		return goproxy{}, err
	}
	var chain []string
	for _, p := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			chain = append(chain, p)
		}
	}
	chain = append(chain, "file://"+filepath.ToSlash(empty))
	return goproxy{value: strings.Join(chain, "|"), emptyDir: empty}, nil
}
