//go:build linux && (386 || arm)

package asuser

import "syscall"

// On 32-bit Linux the calls without the suffix take 16-bit ids.
const (
	sysSetfsuid  = syscall.SYS_SETFSUID32
	sysSetfsgid  = syscall.SYS_SETFSGID32
	sysSetgroups = syscall.SYS_SETGROUPS32
)
