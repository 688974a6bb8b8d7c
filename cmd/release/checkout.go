package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// commit is what git says of a checkout: its HEAD and whether files differ
// from it.
type commit struct {
	hash  string
	time  time.Time
	tags  []string
	dirty bool
}

// headCommit is the commit checked out in dir.
func headCommit(dir string) (commit, error) {
	head, err := git(dir, "log", "-1", "--format=%H %ct")
	if err != nil {
		return commit{}, err
	}
	hash, seconds, _ := strings.Cut(strings.TrimSpace(head), " ")
	unix, err := strconv.ParseInt(seconds, 10, 64)
	if err != nil || len(hash) < 12 {
		return commit{}, fmt.Errorf("git log in %s: unexpected %q", dir, head)
	}
	tags, err := git(dir, "tag", "--points-at", "HEAD")
	if err != nil {
		return commit{}, err
	}
	status, err := git(dir, "status", "--porcelain")
	if err != nil {
		return commit{}, err
	}
	return commit{hash: hash, time: time.Unix(unix, 0).UTC(), tags: strings.Fields(tags), dirty: status != ""}, nil
}

func git(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return string(out), nil
}

// version is the version of the module at c when release is the version
// its source says it is: release itself at the commit tagged so, else the
// pseudo-version of c after release, as Go names a commit of a module
// (`go get module@commit`) whose latest tag is release. So two builds of
// one release's source are told apart by their commit, and sort after the
// release and before the next.
func (c commit) version(release string) (string, error) {
	if slices.Contains(c.tags, release) {
		return release, nil
	}
	return pseudoVersion(release, c.time, c.hash)
}

// pseudoVersion is Go's pseudo-version of the commit hash made at t, after
// the version base (golang.org/x/mod/module.PseudoVersion): v0.1.1-0.TIME-HASH
// after v0.1.0, v0.2.0-rc.1.0.TIME-HASH after v0.2.0-rc.1.
func pseudoVersion(base string, t time.Time, hash string) (string, error) {
	stamp := t.UTC().Format("20060102150405") + "-" + hash[:12]
	if strings.Contains(base, "-") {
		return base + ".0." + stamp, nil
	}
	dot := strings.LastIndexByte(base, '.')
	patch, err := strconv.Atoi(base[dot+1:])
	if dot < 0 || err != nil {
		return "", fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH", base)
	}
	return base[:dot+1] + strconv.Itoa(patch+1) + "-0." + stamp, nil
}
