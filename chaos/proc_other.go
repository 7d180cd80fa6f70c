//go:build !linux

package chaos

import "os/exec"

// dieWithParent does nothing where the kernel cannot tie a child's life to its parent's: stop the suite with
// Ctrl-C, not SIGKILL, there.
func dieWithParent(*exec.Cmd) {}

// runAs does nothing outside Linux: run the suite as an unprivileged user there.
func runAs(*exec.Cmd, uint32, uint32) {}
