package version

import (
	"bufio"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The version the source says it is, is the newest release CHANGELOG.md
// describes, in Keep a Changelog's form: "## [0.1.0] - 2026-12-02".
func TestReleaseIsTheNewestVersionTheChangelogDescribes(t *testing.T) {
	f, err := os.Open("../../CHANGELOG.md")
	require.NoError(t, err)
	defer f.Close()
	heading := regexp.MustCompile(`^## \[(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\] - \d{4}-\d{2}-\d{2}$`)
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		if m := heading.FindStringSubmatch(scan.Text()); m != nil {
			assert.Equal(t, "v"+m[1], Release)
			return
		}
	}
	require.NoError(t, scan.Err())
	t.Fatal("CHANGELOG.md describes no release")
}

func TestTheVersionIsTheOneTheBuildRecorded(t *testing.T) {
	local := &debug.Module{Path: "../caddy-mcp"}
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, Release},
		{"built as the main module", &debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, Release},
		{"a published version", &debug.BuildInfo{Deps: []*debug.Module{
			{Path: "github.com/caddyserver/caddy/v2", Version: "v2.11.9"},
			{Path: ModulePath, Version: "v0.2.0"},
		}}, "v0.2.0"},
		{"a commit after a release", &debug.BuildInfo{Deps: []*debug.Module{
			{Path: ModulePath, Version: "v0.1.1-0.20261202061500-b00a1b7a1b2c"},
		}}, "v0.1.1-0.20261202061500-b00a1b7a1b2c"},
		{"a local copy (xcaddy --with …=./)", &debug.BuildInfo{Deps: []*debug.Module{
			{Path: ModulePath, Version: "v0.0.0-00010101000000-000000000000", Replace: local},
		}}, Release},
		{"replaced by a published fork: the version list-modules shows", &debug.BuildInfo{Deps: []*debug.Module{
			{Path: ModulePath, Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/fork/caddy-mcp", Version: "v0.1.3"}},
		}}, "v0.1.0"},
		{"a module whose path only starts the same", &debug.BuildInfo{Deps: []*debug.Module{
			{Path: ModulePath + "-extras", Version: "v9.0.0"},
		}}, Release},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fromBuild(tt.info))
		})
	}
}

// What `go version -m dist/caddy` printed of a release build (make
// release: xcaddy, this module replaced by the local checkout) is what
// debug.ReadBuildInfo gave that binary.
func TestAReleaseBuildReportsTheVersionItWasNamedWith(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		// Go records a local directory named with no version at a
		// placeholder, and the directory itself at "(devel)".
		{"a local copy named with no version", "unnamed-local-copy.txt", Release},
		// make release names the checkout with the pseudo-version of its
		// commit, which list-modules shows too.
		{"a local copy named with its commit's version", "named-local-copy.txt", "v0.1.1-0.20261203103735-fea78cbd42b2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fromBuild(readBuildInfo(t, tt.file)))
		})
	}
}

// readBuildInfo reads a binary's build info as `go version -m` prints it:
// a line naming the binary and its Go version, then the lines of the build
// info, indented.
func readBuildInfo(t *testing.T, file string) *debug.BuildInfo {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + file)
	require.NoError(t, err)
	_, body, _ := strings.Cut(string(raw), "\n")
	info, err := debug.ParseBuildInfo(strings.ReplaceAll("\n"+body, "\n\t", "\n"))
	require.NoError(t, err)
	return info
}

// A test binary is built as the caddy-mcp module itself: no dependency
// records its version.
func TestATestBinaryReportsTheRelease(t *testing.T) {
	assert.Equal(t, Release, String())
}
