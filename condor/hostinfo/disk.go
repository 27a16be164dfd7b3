package hostinfo

import (
	"fmt"
	"os"
	"syscall"
)

// DiskFreeKiB returns the space available to unprivileged users on the file
// system holding dir, in KiB, as the startd advertises Disk. An empty dir
// means os.TempDir().
func DiskFreeKiB(dir string) (int64, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free disk space under %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize) / 1024, nil
}
