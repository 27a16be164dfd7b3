// Package procenv finds processes by an entry of their environment, as
// the test clusters (slurmtest, sshtest) mark the processes they start.
// It reads /proc, so it works on Linux only.
package procenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Processes returns the IDs of the live processes, other than this one
// and zombies, whose environment holds entry (KEY=VALUE). Processes whose
// environment cannot be read (another user's) are left out.
func Processes(entry string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	want := []byte(entry)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		found := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i:], []byte(") Z")) {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
