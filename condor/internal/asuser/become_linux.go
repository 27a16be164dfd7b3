//go:build linux

package asuser

import (
	"fmt"
	"syscall"
	"unsafe"
)

// become gives the calling thread, which must be locked to its goroutine
// and is never used again once its goroutine ends, the file-system rights
// of a and drops all its capabilities. The raw system calls change only
// the calling thread's credentials (the syscall package's Setgroups and
// the like change every thread's).
func become(a *Account) error {
	if _, _, e := syscall.RawSyscall(sysSetfsgid, uintptr(a.GID), 0, 0); e != 0 {
		return fmt.Errorf("setfsgid: %w", e)
	}
	if got := fsgid(); got != a.GID {
		return fmt.Errorf("setfsgid %d: the thread's file-system group is still %d", a.GID, got)
	}
	groups := make([]uint32, len(a.Groups))
	copy(groups, a.Groups)
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, e := syscall.RawSyscall(sysSetgroups, uintptr(len(groups)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	// Leaving file-system uid 0 clears the file-system capabilities
	// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER...) of the thread.
	if _, _, e := syscall.RawSyscall(sysSetfsuid, uintptr(a.UID), 0, 0); e != 0 {
		return fmt.Errorf("setfsuid: %w", e)
	}
	if got := fsuid(); got != a.UID {
		return fmt.Errorf("setfsuid %d: the thread's file-system user is still %d", a.UID, got)
	}
	return dropCapabilities()
}

// fsuid returns the thread's file-system uid: setfsuid with an invalid id
// changes nothing and returns the current one.
func fsuid() uint32 {
	r, _, _ := syscall.RawSyscall(sysSetfsuid, ^uintptr(0), 0, 0)
	return uint32(r)
}

func fsgid() uint32 {
	r, _, _ := syscall.RawSyscall(sysSetfsgid, ^uintptr(0), 0, 0)
	return uint32(r)
}

// dropCapabilities empties the thread's effective, permitted and
// inheritable capability sets (capset acts on the calling thread only), so
// that no capability, such as CAP_SYS_PTRACE for /proc, widens what the
// account may open.
func dropCapabilities() error {
	const linuxCapabilityVersion3 = 0x20080522
	hdr := struct {
		version uint32
		pid     int32
	}{version: linuxCapabilityVersion3}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("dropping capabilities: %w", e)
	}
	return nil
}
