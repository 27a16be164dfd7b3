package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLostStateKeepsThePool loses the state of a running pool with a job
// running (the state file and its backup gone): the plan says it will
// adopt the running nodes, not start new ones, and the apply adopts them:
// the same agents, the same central manager, the job still running, once,
// and finishing.
func TestLostStateKeepsThePool(t *testing.T) {
	t.Parallel()
	// Long enough to run through the plan and the apply below.
	w, cm := poolWithRunningJob(t, "executable = /bin/sh\narguments = \"-c 'sleep 20; echo done'\"\noutput = job.out\nlog = job.log\nqueue\n")
	before := agentPIDs(w.dir)
	slices.Sort(before)

	for _, f := range []string{"pond.state", "pond.state.backup"} {
		if err := os.Remove(filepath.Join(w.dir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	plan := w.expect(0, "plan")
	if out := plan.stdout + plan.stderr; !strings.Contains(out, "Will adopt 2 running node(s)") || strings.Contains(out, "Will start") {
		t.Errorf("the plan does not say it adopts the running nodes:\n%s", out)
	}
	w.expect(0, "apply", "-auto-approve")
	after := agentPIDs(w.dir)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("the agents were %v, after the apply %v: want the same processes", before, after)
	}
	if got := w.output("cm"); got != cm {
		t.Errorf("the central manager moved from %s to %s", cm, got)
	}
	if r := w.expect(0, "condor", "q", "-pool", cm, "-af", "JobStatus"); strings.TrimSpace(r.stdout) != "2" {
		t.Errorf("the job after the apply: %q, want it running still", r.stdout)
	}
	eventually(t, time.Minute, func() error {
		log := readFile(t, filepath.Join(w.dir, "job.log"))
		if strings.Count(log, "\n005 (") != 1 || strings.Count(log, "\n001 (") != 1 {
			return fmt.Errorf("want one execute and one termination event in the job's log:\n%s", log)
		}
		return nil
	})
	if out := readFile(t, filepath.Join(w.dir, "job.out")); out != "done\n" {
		t.Errorf("the job's output: %q", out)
	}
	w.expect(0, "plan", "-detailed-exitcode")
}

// poolWithRunningJob applies reapPool in a new work directory, submits
// the one job sub describes (its log job.log) and waits until it runs. It
// returns the work directory and the pool's central manager; the pool's
// jobs are described if the test fails, and the pool is destroyed.
func poolWithRunningJob(t *testing.T, sub string) (*workdir, string) {
	t.Helper()
	w := newWorkdir(t, "")
	cm := w.applyPool(reapPool)
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
	})
	w.write("job.sub", sub)
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	eventually(t, time.Minute, func() error {
		if r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus"); strings.TrimSpace(r.stdout) != "2" {
			return fmt.Errorf("the job's status: %s", r)
		}
		return nil
	})
	return w, cm
}
