//go:build !linux

package ddblocal

import "syscall"

func childAttrs() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
