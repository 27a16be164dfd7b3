package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deferralPool is a one-node pool of two slots whose negotiator cycles
// rarely: every five minutes, and no sooner than 10 s after the previous
// cycle when a schedd asks for one.
const deferralPool = `
pool "deferral" {
  nodes  = 1
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "300", NEGOTIATOR_MIN_INTERVAL = "10", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.deferral.central_manager
}
`

// TestDeferralPrepTime submits, 20 s before their deferral_time, two jobs
// with deferral_prep_time = 15, one with the requirements HTCondor's
// condor_submit gives a deferred job (TARGET.HasJobDeferral): both are
// matched and their slots claimed (the jobs running) at least 6 s before
// that time, the first starts within a second of its deferral time
// (measured by the job's own clock), and the second, removed while it
// waits on its slot, never runs.
func TestDeferralPrepTime(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", deferralPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	mark := fmt.Sprintf("pond-deferral-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for pid := range markedProcesses(mark) {
			_ = syscallKill(pid)
		}
	})

	// The slots are up, and say they defer jobs' start, as HTCondor's do.
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name", "HasJobDeferral")
		if strings.Count(r.stdout, " true") != 2 {
			return fmt.Errorf("not two slots with HasJobDeferral true: %s", r)
		}
		return nil
	})

	at := time.Now().Unix() + 20
	w.write("timed.sh", "#!/bin/sh\ndate +%s.%N\n")
	// The requirements HTCondor's condor_submit gives a deferred job.
	w.write("timed.sub", fmt.Sprintf("executable = timed.sh\noutput = timed.out\nerror = timed.err\n"+
		"requirements = TARGET.HasJobDeferral\ndeferral_time = %d\ndeferral_prep_time = 15\nqueue\n", at))
	w.write("removed.sh", fmt.Sprintf("#!/bin/sh\nsh -c 'sleep 60' %s\n", mark))
	w.write("removed.sub", fmt.Sprintf("executable = removed.sh\noutput = removed.out\n"+
		"deferral_time = %d\ndeferral_prep_time = 15\nqueue\n", at))
	w.expect(0, "condor", "submit", "-pool", cm, "timed.sub")   // cluster 1
	w.expect(0, "condor", "submit", "-pool", cm, "removed.sub") // cluster 2
	ran := make(chan []int, 1)
	go func() {
		// The removed job's process never shows up, until well after
		// the deferral time.
		var seen []int
		for time.Now().Unix() < at+5 {
			for pid := range markedProcesses(mark) {
				seen = append(seen, pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
		ran <- seen
	}()

	// Both are matched, and run (wait on their slots), before their time.
	eventually(t, time.Until(time.Unix(at-6, 0)), func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus")
		if !strings.Contains(r.stdout, "1 2") || !strings.Contains(r.stdout, "2 2") {
			return fmt.Errorf("the deferred jobs are not both running yet: %s", r)
		}
		return nil
	})
	w.expect(0, "condor", "rm", "-pool", cm, "2")

	eventually(t, 60*time.Second, func() error {
		if r := w.run("condor", "history", "-pool", cm, "-af", "ClusterId"); !slices.Contains(strings.Fields(r.stdout), "1") {
			return fmt.Errorf("the timed job has not completed yet: %s", r)
		}
		return nil
	})
	out := strings.TrimSpace(readFile(t, filepath.Join(w.dir, "timed.out")))
	started, err := strconv.ParseFloat(out, 64)
	if err != nil {
		t.Fatalf("timed job output %q: %v", out, err)
	}
	if late := started - float64(at); late < 0 || late > 1 {
		t.Errorf("the job started %.3f s after its deferral time %d, want within 1 s", late, at)
	} else {
		t.Logf("the job started %.3f s after its deferral time", late)
	}
	if seen := <-ran; len(seen) > 0 {
		t.Errorf("the job removed while it waited for its deferral time ran: processes %v", seen)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "removed.out")); err == nil {
		t.Errorf("the removed job's output came back")
	}
}
