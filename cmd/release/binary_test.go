package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
	"github.com/caddymcp/caddy-mcp/internal/version"
)

// RELEASE_BINARY names a binary `make release` built from this checkout
// (dist/caddy, relative to the repository): CI sets it once it has built
// one. Building takes minutes, too long for every run of the tests.
const releaseBinary = "RELEASE_BINARY"

// A fleet mid-upgrade tells its nodes apart by what they say they run.
func TestTheReleaseBinarySaysTheVersionOfItsSource(t *testing.T) {
	bin := os.Getenv(releaseBinary)
	if bin == "" {
		t.Skip(releaseBinary + " names no binary built by make release")
	}
	if !filepath.IsAbs(bin) {
		bin = filepath.Join("..", "..", bin)
	}
	c, err := headCommit(".")
	require.NoError(t, err, "the binary's source is a git checkout")
	want, err := c.version(version.Release)
	require.NoError(t, err)

	out, err := exec.Command(bin, "list-modules", "--versions", "--skip-standard").Output()
	require.NoError(t, err)
	assert.Contains(t, strings.Split(string(out), "\n"), "http.handlers.mcp "+want, "list-modules:\n%s", out)
	assert.NotContains(t, string(out), "v0.0.0-00010101000000-000000000000")

	assert.Equal(t, want, statusVersion(t, bin))
}

// statusVersion runs bin with an mcp handler and is the version its admin
// API's GET /mcp/status says.
func statusVersion(t *testing.T, bin string) string {
	t.Helper()
	caddy, err := caddyrun.Start(bin, t.TempDir(), "release", func(port, adminPort int, storage string) string {
		return caddyrun.Site(port, adminPort, storage, "INFO", "mcp\nreverse_proxy 127.0.0.1:9")
	})
	require.NoError(t, err)
	defer caddy.Stop()
	resp, err := http.Get("http://" + caddy.Admin + "/mcp/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var status struct {
		Version  string            `json:"version"`
		Handlers []json.RawMessage `json:"handlers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
	require.Len(t, status.Handlers, 1, "the mcp handler")
	return status.Version
}
