package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/version"
)

// The expected versions are Go's own: golang.org/x/mod's PseudoVersion, and
// a pseudo-version go.sum holds.
func TestPseudoVersionIsTheOneGoGivesTheCommit(t *testing.T) {
	made := time.Date(2026, 12, 3, 10, 37, 35, 0, time.UTC)
	tests := []struct {
		base string
		at   time.Time
		hash string
		want string
	}{
		{"v0.1.0", made, "fea78cbd42b2b9c0c13af0ea11d0238e3dd9c6aa", "v0.1.1-0.20261203103735-fea78cbd42b2"},
		{"v1.9.9", made.In(time.FixedZone("CET", 3600)), "fea78cbd42b2b9c0c13af0ea11d0238e3dd9c6aa", "v1.9.10-0.20261203103735-fea78cbd42b2"},
		{"v0.2.0-rc.1", made, "fea78cbd42b2b9c0c13af0ea11d0238e3dd9c6aa", "v0.2.0-rc.1.0.20261203103735-fea78cbd42b2"},
		{"v0.6.0-dev", time.Date(2022, 4, 19, 22, 30, 38, 0, time.UTC), "86c51ed26bb4", "v0.6.0-dev.0.20220419223038-86c51ed26bb4"},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			v, err := pseudoVersion(tt.base, tt.at, tt.hash)
			require.NoError(t, err)
			assert.Equal(t, tt.want, v)
		})
	}
	_, err := pseudoVersion("v1", made, "fea78cbd42b2")
	assert.ErrorContains(t, err, `"v1"`)
}

func TestACheckoutIsItsReleaseAtTheTagElseItsCommitsPseudoVersion(t *testing.T) {
	repo := newRepo(t)
	versionOf := func() (string, commit) {
		t.Helper()
		c, err := headCommit(repo.dir)
		require.NoError(t, err)
		v, err := c.version("v0.1.0")
		require.NoError(t, err)
		return v, c
	}
	v, c := versionOf()
	assert.Equal(t, "v0.1.1-0.20261203093735-"+repo.hash, v, "the committer's time, in UTC")
	assert.False(t, c.dirty)

	repo.git(t, "tag", "v0.0.9")
	v, _ = versionOf()
	assert.Equal(t, "v0.1.1-0.20261203093735-"+repo.hash, v, "a tag of another version")

	repo.git(t, "tag", "v0.1.0")
	v, _ = versionOf()
	assert.Equal(t, "v0.1.0", v)

	require.NoError(t, os.WriteFile(filepath.Join(repo.dir, "go.mod"), []byte("module example.com/m\n\ngo 1.26\n"), 0o644))
	v, c = versionOf()
	assert.Equal(t, "v0.1.0", v, "the version of the commit")
	assert.True(t, c.dirty)
}

func TestXcaddyIsToldThisCheckoutsVersion(t *testing.T) {
	repo := newRepo(t)
	t.Chdir(repo.dir)
	pseudo, err := pseudoVersion(version.Release, time.Date(2026, 12, 3, 9, 37, 35, 0, time.UTC), repo.hash)
	require.NoError(t, err)
	tests := []struct {
		module, replace, want string
	}{
		{"example.com/plugin", "", "example.com/plugin"},
		{"example.com/plugin", "v1.2.3", "example.com/plugin@v1.2.3"},
		{"example.com/plugin", "/src/plugin", "example.com/plugin=/src/plugin"},
		{"example.com/plugin", ".", "example.com/plugin=" + repo.dir},
		{version.ModulePath, "v0.1.0", version.ModulePath + "@v0.1.0"},
		{version.ModulePath, ".", version.ModulePath + "@" + pseudo + "=" + repo.dir},
		{version.ModulePath, "./", version.ModulePath + "@" + pseudo + "=" + repo.dir},
	}
	for _, tt := range tests {
		t.Run(tt.module+" "+tt.replace, func(t *testing.T) {
			with, err := withArg(tt.module, tt.replace)
			require.NoError(t, err)
			assert.Equal(t, tt.want, with)
		})
	}
	_, err = withArg(version.ModulePath, "../other-checkout")
	assert.ErrorContains(t, err, "../other-checkout")
}

// repo is a git repository of one commit, made at fixed times.
type repo struct {
	dir  string
	hash string // the commit's, abbreviated to 12 digits
}

func newRepo(t *testing.T) repo {
	r := repo{dir: t.TempDir()}
	r.git(t, "init", "--quiet")
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "go.mod"), []byte("module example.com/m\n"), 0o644))
	r.git(t, "add", "go.mod")
	r.git(t, "-c", "commit.gpgsign=false", "commit", "--quiet", "-m", "m")
	r.hash = r.git(t, "rev-parse", "--short=12", "HEAD")[:12]
	return r
}

func (r repo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com",
		"GIT_AUTHOR_DATE=2026-12-02T06:15:00Z", "GIT_COMMITTER_DATE=2026-12-03T10:37:35+01:00")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}
