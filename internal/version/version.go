// Package version names the release of caddy-mcp a binary holds, as
// /mcp/status shows it.
package version

import (
	"runtime/debug"
	"strings"
	"sync"
)

// Release is the newest version CHANGELOG.md describes: the version of
// this source. A test keeps the two the same.
const Release = "v0.2.0"

// ModulePath is the Go module whose version a binary may record.
const ModulePath = "github.com/caddymcp/caddy-mcp"

// placeholder is the version Go records for a module replaced by a local
// directory without a version of its own (xcaddy build --with
// github.com/caddymcp/caddy-mcp=./): a version of nothing.
const placeholder = "v0.0.0-00010101000000-000000000000"

// String is the version of caddy-mcp in this binary: the one `caddy
// list-modules --versions` shows, as Go recorded it for the module: a
// published version (xcaddy build --with
// github.com/caddymcp/caddy-mcp@v0.2.0), a commit's pseudo-version, or the
// version `make release` names a local checkout with. Release when Go
// recorded none: a build of this module itself, or of a local copy named
// with no version.
var String = sync.OnceValue(func() string {
	info, _ := debug.ReadBuildInfo()
	return fromBuild(info)
})

// fromBuild is the module's version as info records it, Release when info
// records none: no build info, the module built as the main module, or
// replaced by a local directory with no version named.
//
// The version is the one on the left of a replace, as list-modules shows
// it: a local directory replaced at a version says which version it holds,
// and its own version is "(devel)" or "".
func fromBuild(info *debug.BuildInfo) string {
	if info == nil {
		return Release
	}
	for _, dep := range info.Deps {
		if dep.Path != ModulePath {
			continue
		}
		if dep.Version == placeholder || !strings.HasPrefix(dep.Version, "v") {
			return Release // a local directory named with no version, or "(devel)"
		}
		return dep.Version
	}
	return Release
}
