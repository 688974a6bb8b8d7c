//go:build !linux

package redistest

import "os/exec"

// killWithParent does nothing where the kernel cannot kill a child with its
// parent: a test binary that dies on a timeout leaves its servers running.
func killWithParent(*exec.Cmd) {}
