// Package inherit keeps the open files a process was started with from
// reaching the processes it starts.
//
// A program started from a shell, a CI runner or a service manager may be
// handed open files besides its standard streams: a lock file the shell
// holds on descriptor 9, a runner's pipe, a credential. Go opens its own
// files close-on-exec, but a descriptor it inherited stays open across
// every exec it makes, so an agent started that way would pass it to its
// supervisors and from them to every job, which could then read or write
// through it with the rights it was opened with. Seal marks every such
// descriptor close-on-exec: the process itself keeps using what it was
// given, and a child gets only what its starter hands it on purpose.
package inherit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Seal marks every open descriptor above standard error close-on-exec.
func Seal() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("marking inherited files close-on-exec: %w", err)
	}
	// A kernel before 5.11: each descriptor the process has, one by one.
	return sealEach()
}

// sealEach marks the descriptors /proc/self/fd lists close-on-exec.
func sealEach() error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing inherited files: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("listing inherited files: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 {
			continue
		}
		// The directory's own descriptor, closed since, fails with EBADF.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, syscall.EBADF) {
			return fmt.Errorf("marking inherited file %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}
