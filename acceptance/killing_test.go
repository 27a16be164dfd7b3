package acceptance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freezerRoot is cgroup v1's freezer hierarchy: a process frozen there
// takes no signal, SIGKILL included, until it is thawed, as a process
// stuck in the kernel (on a dead file server, say).
const freezerRoot = "/sys/fs/cgroup/freezer"

// findProcess returns the pid of the process whose command line is argv.
func findProcess(argv ...string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Equal(b, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %q", argv)
}

// TestKillingTimeout preempts a job that ignores SIGTERM and whose process
// no signal ends (it is frozen, as a process stuck in the kernel is): its
// KillSig and MachineMaxVacateTime (2 s) do nothing, nor does its hard
// kill; KILLING_TIMEOUT (3 s) later the startd gives up waiting for it,
// the job is evicted (004) and the preempting job runs on the slot.
func TestKillingTimeout(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("freezing a job's process takes root")
	}
	if _, err := os.Stat(freezerRoot); err != nil {
		t.Skip("no cgroup v1 freezer hierarchy to freeze a job's process with")
	}
	w := newWorkdir(t, "")
	cm := w.applyPool(preemptPool("killto", `KILLING_TIMEOUT = "3"`))

	marker := strconv.Itoa(9000000 + os.Getpid()%1000000)
	w.writeExec("stuck.sh", "#!/bin/sh\ntrap '' TERM\nexec /bin/sleep "+marker+"\n")
	w.write("long.sub", "executable = stuck.sh\nlog = jobs.log\nqueue\n")
	w.write("pref.sub", preferredSub)
	w.expect(0, "condor", "submit", "-pool", cm, "long.sub")
	var pid int
	eventually(t, 60*time.Second, func() error {
		var err error
		pid, err = findProcess("/bin/sleep", marker)
		return err
	})
	cg := filepath.Join(freezerRoot, "pond-killto-"+marker)
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(cg, "freezer.state"), []byte("THAWED"), 0)
		eventually(t, 20*time.Second, func() error {
			if err := os.Remove(cg); err != nil {
				return fmt.Errorf("the thawed job is not gone yet: %w", err)
			}
			return nil
		})
	})
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cg, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		t.Fatal(err)
	}

	submitted := time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, "pref.sub")
	log := filepath.Join(w.dir, "jobs.log")
	eventually(t, 60*time.Second, func() error {
		if evs := events(t, log); count(evs["002"], "005") == 0 {
			return fmt.Errorf("the preempting job has not run: %v", evs)
		}
		return nil
	})
	// Cycles of 2 s, the vacate time, KILLING_TIMEOUT, the job's second.
	if d := time.Since(submitted); d > 30*time.Second {
		t.Errorf("the preempting job ended %v after its submission; want about 2+3+1 s and a cycle or two", d)
	}
	evs := events(t, log)
	if count(evs["001"], "004") != 1 {
		t.Errorf("events %v; want the stuck job evicted once:\n%s\n%s", evs, readFile(t, log), w.run("condor", "q", "-pool", cm, "-af", "VacateReason", "LastVacateReason", "HoldReason"))
	}
	// The stuck process is still there, frozen: the slot went on without it.
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
		t.Errorf("the frozen process is gone (%v): the test froze nothing", err)
	}
}
