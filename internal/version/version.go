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
const Release = "v0.1.0"

// modulePath is the Go module whose version a binary may record.
const modulePath = "github.com/caddymcp/caddy-mcp"

// String is the version of caddy-mcp in this binary: the one `caddy
// list-modules --versions` shows when Caddy was built from a published
// version of the module (xcaddy build --with
// github.com/caddymcp/caddy-mcp@v0.1.0, or a commit's pseudo-version),
// and Release when it was built from a local copy, whose module version Go
// does not know.
var String = sync.OnceValue(func() string {
	info, _ := debug.ReadBuildInfo()
	return fromBuild(info)
})

// fromBuild is the module's version as info records it, Release when info
// records none: no build info, the module built as the main module, or
// replaced by a local directory.
func fromBuild(info *debug.BuildInfo) string {
	if info == nil {
		return Release
	}
	for _, dep := range info.Deps {
		if dep.Path != modulePath {
			continue
		}
		if dep.Replace != nil && dep.Replace.Version == "" {
			return Release // a local directory: its version is a placeholder
		}
		if !strings.HasPrefix(dep.Version, "v") {
			return Release // "(devel)"
		}
		return dep.Version // as list-modules shows it
	}
	return Release
}
