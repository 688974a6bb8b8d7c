// Command release builds a release Caddy binary with xcaddy, as pinned by
// xcaddy.json: the Caddy version, the xcaddy version, and the plugin list
// (this plugin from the local checkout by default).
//
//	go run ./cmd/release
//
// A plugin's "replace" is a local path or a version; without one, xcaddy
// fetches the module's latest release.
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
		with := p.Module
		switch {
		case p.Replace == "":
		case p.Replace[0] == '.' || filepath.IsAbs(p.Replace):
			abs, err := filepath.Abs(p.Replace)
			if err != nil {
				return err
			}
			with += "=" + abs
		default:
			with += "@" + p.Replace
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
