package acceptance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// reapPool is a central manager and a worker of one slot.
const reapPool = `
pool "reap" {
  nodes  = 2
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.reap.central_manager
}
`

// markedProcesses lists the live processes whose command line holds mark,
// and the working directory of each.
func markedProcesses(mark string) map[int]string {
	entries, _ := os.ReadDir("/proc")
	found := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(raw, []byte(mark)) || isZombie(pid) {
			continue
		}
		found[pid], _ = os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
	}
	return found
}

// TestKilledWorkerLeavesNoJobProcess runs a job whose grandchild escapes
// its process group and session (setsid after a double fork) and writes a
// heartbeat in the scratch directory, then kill -9's the worker's agent:
// within seconds no process of the job is left and the heartbeat stops,
// well before the schedd could requeue the job. The scratch directory goes
// when the worker's agent starts again; the job then runs there again, the
// agent is killed again, and destroy removes that scratch directory.
func TestKilledWorkerLeavesNoJobProcess(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", reapPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	mark := fmt.Sprintf("pond-reap-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for pid := range markedProcesses(mark) {
			_ = syscallKill(pid)
		}
	})
	w.write("job.sh", fmt.Sprintf(`#!/bin/sh
( setsid sh -c 'while :; do date +%%s%%N > beat; sleep 0.1; done' %[1]s & )
sh -c 'sleep 600' %[1]s
`, mark))
	w.write("job.sub", "executable = job.sh\noutput = job.out\nerror = job.err\nrequirements = (Machine == \"reap-1\")\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")

	// running waits until both processes of the job run, and returns the
	// scratch directory, where the heartbeat goes.
	running := func() string {
		t.Helper()
		var scratch string
		eventually(t, 90*time.Second, func() error {
			procs := markedProcesses(mark)
			if len(procs) < 2 {
				return fmt.Errorf("%d of the job's 2 marked processes run", len(procs))
			}
			for _, cwd := range procs {
				scratch = cwd
			}
			if _, err := os.Stat(filepath.Join(scratch, "beat")); err != nil {
				return fmt.Errorf("no heartbeat yet: %w", err)
			}
			return nil
		})
		return scratch
	}
	// killed kills the worker's agent and checks that the job's processes
	// all die within a few seconds, the escaped one too.
	killed := func(scratch string) {
		t.Helper()
		killNode(t, w, "reap-1")
		start := time.Now()
		eventually(t, 2*time.Second, func() error {
			if procs := markedProcesses(mark); len(procs) > 0 {
				return fmt.Errorf("the job's processes %v outlive the agent", procs)
			}
			return nil
		})
		t.Logf("the job's processes died %s after the agent", time.Since(start).Round(time.Millisecond))
		before, _ := os.ReadFile(filepath.Join(scratch, "beat"))
		time.Sleep(time.Second)
		if after, _ := os.ReadFile(filepath.Join(scratch, "beat")); !bytes.Equal(before, after) {
			t.Errorf("the heartbeat goes on after the agent was killed: %q then %q", before, after)
		}
	}

	scratch := running()
	t.Logf("scratch directory %s", scratch)
	killed(scratch)
	if _, err := os.Stat(scratch); err != nil {
		t.Fatalf("the scratch directory is gone before the agent starts again: %v", err)
	}

	// The agent starts again: the earlier run's scratch directory goes.
	w.expect(0, "apply", "-auto-approve")
	eventually(t, 10*time.Second, func() error {
		if _, err := os.Stat(scratch); err == nil {
			return fmt.Errorf("%s is still there", scratch)
		}
		return nil
	})

	// The job was requeued and runs there again; the agent is killed
	// again, and destroy removes the scratch directory.
	scratch = running()
	killed(scratch)
	w.expect(0, "destroy", "-auto-approve")
	if _, err := os.Stat(scratch); err == nil {
		t.Errorf("%s is still there after destroy", scratch)
	}
	if _, err := os.Stat(scratch + ".tmp"); err == nil {
		t.Errorf("%s.tmp is still there after destroy", scratch)
	}
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
