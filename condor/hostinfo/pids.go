package hostinfo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The files that bound the host's process ids (every thread takes one).
const (
	procPIDMax     = "/proc/sys/kernel/pid_max"
	procThreadsMax = "/proc/sys/kernel/threads-max"
	procSelfCgroup = "/proc/self/cgroup"
	cgroupRoot     = "/sys/fs/cgroup"
)

// ReservedPIDs is how many of the lowest process ids the kernel keeps for
// itself once they wrap (RESERVED_PIDS).
const ReservedPIDs = 300

// ProcessIDs is what bounds the process ids, one a thread, of the host and
// of the agent's cgroup, and how many are in use.
type ProcessIDs struct {
	PIDMax     int64 // kernel.pid_max
	ThreadsMax int64 // kernel.threads-max
	InUse      int64 // threads of the host now (/proc/loadavg)
	// CgroupMax is the smallest pids.max of the agent's cgroup and its
	// parents, 0 for none; Cgroup is the directory it is in, CgroupInUse
	// its pids.current.
	CgroupMax   int64
	Cgroup      string
	CgroupInUse int64
}

// ReadProcessIDs reads the host's bounds on process ids and their use; a
// pids cgroup that cannot be read is left out (CgroupMax 0).
func ReadProcessIDs() (ProcessIDs, error) {
	var ids ProcessIDs
	var err error
	if ids.PIDMax, err = readCount(procPIDMax); err != nil {
		return ids, err
	}
	if ids.ThreadsMax, err = readCount(procThreadsMax); err != nil {
		return ids, err
	}
	data, err := os.ReadFile(procLoadAvg)
	if err != nil {
		return ids, err
	}
	if ids.InUse, err = ParseLoadAvgTasks(data); err != nil {
		return ids, fmt.Errorf("%s: %w", procLoadAvg, err)
	}
	if data, err = os.ReadFile(procSelfCgroup); err != nil {
		return ids, nil
	}
	hierarchy, dir, err := ParsePidsCgroup(data)
	if err != nil {
		return ids, nil
	}
	// The least limit on the way up to the hierarchy's root (which has
	// none).
	top := filepath.Join(cgroupRoot, hierarchy)
	for d := filepath.Join(top, dir); strings.HasPrefix(d, top); d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "pids.max"))
		if err == nil {
			if n, err := ParsePidsMax(b); err == nil && n > 0 && (ids.CgroupMax == 0 || n < ids.CgroupMax) {
				ids.CgroupMax, ids.Cgroup = n, d
			}
		}
		if d == top {
			break
		}
	}
	if ids.Cgroup != "" {
		if b, err := os.ReadFile(filepath.Join(ids.Cgroup, "pids.current")); err == nil {
			ids.CgroupInUse, _ = ParsePidsMax(b)
		}
	}
	return ids, nil
}

// readCount reads a file holding one number of at least 0.
func readCount(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a number of at least 0", path, bytes.TrimSpace(b))
	}
	return n, nil
}

// ParseLoadAvgTasks returns the number of threads of the host of the
// contents of /proc/loadavg ("0.52 0.58 0.59 1/467 12345": 467).
func ParseLoadAvgTasks(data []byte) (int64, error) {
	f := strings.Fields(string(data))
	if len(f) < 4 {
		return 0, errors.New("no running/total field")
	}
	_, total, ok := strings.Cut(f[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not running/total threads", f[3])
	}
	return n, nil
}

// ParsePidsMax returns the number of a cgroup's pids.max or pids.current,
// 0 for "max" (no limit).
func ParsePidsMax(data []byte) (int64, error) {
	s := string(bytes.TrimSpace(data))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is neither max nor a number of at least 0", s)
	}
	return n, nil
}

// ParsePidsCgroup returns the process's cgroup of the pids controller from
// the contents of /proc/self/cgroup: the hierarchy (the directory below
// /sys/fs/cgroup it is mounted on: "pids" for cgroup v1's "N:pids:PATH"
// line, "" for cgroup v2's "0::PATH") and the cgroup's PATH in it.
func ParsePidsCgroup(data []byte) (hierarchy, dir string, err error) {
	v2 := ""
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimRight(line, "\n"), ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		p := filepath.Clean(f[2])
		if f[0] == "0" && f[1] == "" {
			v2 = p
			continue
		}
		for c := range strings.SplitSeq(f[1], ",") {
			if c == "pids" {
				return "pids", p, nil
			}
		}
	}
	if v2 == "" {
		return "", "", errors.New("no cgroup of the pids controller")
	}
	return "", v2, nil
}
