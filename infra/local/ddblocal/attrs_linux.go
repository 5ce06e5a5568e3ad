package ddblocal

import "syscall"

// childAttrs asks the kernel to kill the JVM when the stack process dies, so a
// SIGKILL of the stack leaves no orphan.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
