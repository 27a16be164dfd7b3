//go:build linux && !386 && !arm

package asuser

import "syscall"

// On 64-bit Linux these calls take 32-bit ids.
const (
	sysSetfsuid  = syscall.SYS_SETFSUID
	sysSetfsgid  = syscall.SYS_SETFSGID
	sysSetgroups = syscall.SYS_SETGROUPS
)
