package chaos

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process when the suite's process dies, so that a suite killed
// mid-run leaves no broker or relay running behind it.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// runAs makes cmd run as the given user and group.
func runAs(cmd *exec.Cmd, uid, gid uint32) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid}
}
