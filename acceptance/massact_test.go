package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMassHoldReleaseRemove holds a cluster of 20,000 idle jobs
// (POND_MASSACT_JOBS to change it), releases them by constraint and
// removes them all, as an administrator with a big queue does: each
// command prints HTCondor's one line, the queue's counts are right at
// once, the job log has each event once per job, and the agent's peak
// resident memory does not grow with the jobs acted on. It logs each
// command's time and the agent's CPU time.
func TestMassHoldReleaseRemove(t *testing.T) {
	n := 20000
	if v := os.Getenv("POND_MASSACT_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("POND_MASSACT_JOBS=%q: want a positive number of jobs", v)
		}
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", limitsPool("mass", ""))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	w.write("mass.sub", fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nlog = mass.log\nqueue %d\n", n))
	w.expect(0, "condor", "submit", "-pool", cm, "mass.sub")
	totals := func(want string) {
		t.Helper()
		r := w.expect(0, "condor", "q", "-pool", cm, "-totals")
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("condor q -totals: want %q in\n%s", want, r.stdout)
		}
	}
	totals(fmt.Sprintf("%d jobs; 0 completed, 0 removed, %d idle", n, n))
	peak := func() int64 {
		var top int64
		for _, kb := range peakRSS(t, w) {
			top = max(top, kb)
		}
		return top
	}
	before := peak()
	steps := []struct {
		args    []string
		stdout  string
		totals  string
		ev      string
		evCount int
	}{
		{[]string{"hold", "1"}, "All jobs in cluster 1 have been held\n", fmt.Sprintf("%d jobs; 0 completed, 0 removed, 0 idle, 0 running, %d held", n, n), "012", n},
		{[]string{"release", "-constraint", "ClusterId == 1"}, "All jobs matching constraint (ClusterId == 1) have been released\n", fmt.Sprintf("%d jobs; 0 completed, 0 removed, %d idle, 0 running, 0 held", n, n), "013", n},
		{[]string{"rm", "-all"}, "All jobs marked for removal.\n", " 0 jobs;", "009", n},
	}
	for _, st := range steps {
		start, cpu := time.Now(), agentCPU(w)
		r := w.expect(0, append(append([]string{"condor"}, st.args[0], "-pool", cm), st.args[1:]...)...)
		// The agent's CPU time changes little with the machine's load,
		// the wall-clock time a lot.
		t.Logf("condor %s of %d jobs: %s, the agent's CPU %s", strings.Join(st.args, " "), n, time.Since(start).Round(time.Millisecond),
			(agentCPU(w) - cpu).Round(time.Millisecond))
		if r.stdout != st.stdout {
			lines := strings.Count(r.stdout, "\n")
			first, _, _ := strings.Cut(r.stdout, "\n")
			t.Errorf("condor %s printed %d lines (the first %q), want %q", strings.Join(st.args, " "), lines, first, st.stdout)
		}
		totals(st.totals)
		// Each job's event once, in the log, by the time the command
		// returned.
		log, err := os.ReadFile(filepath.Join(w.dir, "mass.log"))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, m := range regexp.MustCompile(`(?m)^`+st.ev+` \((\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(string(log), -1) {
			seen[m[1]]++
		}
		if len(seen) != st.evCount {
			t.Errorf("after condor %s the log has %s events of %d jobs, want %d", st.args[0], st.ev, len(seen), st.evCount)
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("job %s has %d %s events, want 1", id, k, st.ev)
				break
			}
		}
	}
	after := peak()
	t.Logf("agent VmHWM %d MiB before the actions, %d MiB after", before>>10, after>>10)
	if after-before > 256<<10 {
		t.Errorf("the agent's peak resident memory grew by %d MiB while %d jobs were held, released and removed", (after-before)>>10, n)
	}
	w.expect(0, "destroy", "-auto-approve")
}

// agentCPU is the CPU time, user and system, the workdir's agents have
// used (from /proc/PID/stat, in the kernel's 100 ticks a second).
func agentCPU(w *workdir) time.Duration {
	var total time.Duration
	for _, pid := range agentPIDs(w.dir) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command, which is in parentheses.
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}
