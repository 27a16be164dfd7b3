// Package procenv finds processes by an entry of their environment, as
// the test clusters (slurmtest, sshtest) mark the processes they start.
// It reads /proc, so it works on Linux only.
package procenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
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
		env, err := environ(e.Name())
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

// environ reads the environment of process pid. A process in the middle of
// an exec shows an empty one for an instant, as a kernel thread always
// does: an empty environment of a process that is no kernel thread (whose
// parent is not kthreadd, pid 2) is read again a few times.
func environ(pid string) ([]byte, error) {
	path := filepath.Join("/proc", pid, "environ")
	for try := 0; ; try++ {
		env, err := os.ReadFile(path)
		if err != nil || len(env) > 0 || try == 10 || kernelThread(pid) {
			return env, err
		}
		time.Sleep(time.Millisecond)
	}
}

// kernelThread reports whether process pid is kthreadd or one of its
// children, the kernel's threads.
func kernelThread(pid string) bool {
	if pid == "2" {
		return true
	}
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return true
	}
	f := bytes.Fields(stat[i+1:]) // state, ppid, ...
	return len(f) < 2 || string(f[1]) == "2"
}
