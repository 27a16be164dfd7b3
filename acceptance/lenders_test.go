package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestFlockLendersFirst applies examples/flock and fills spare's four
// slots with jobs flocked in from busy; a job then submitted to spare
// takes one of them back within a negotiation cycle or two (spare's
// startds rank their own pool's jobs higher: lenders first), long before
// any flocked job would have ended. The flocked job it preempted is
// evicted (004 in its job log), goes back to idle at busy's schedd, and
// later runs to the end: every job of busy completes exactly once.
func TestFlockLendersFirst(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "flock")
	w.expect(0, "init")
	w.expect(0, "apply", "-auto-approve")
	busy, spare := w.output("busy"), w.output("spare")
	if busy == "" || spare == "" || busy == spare {
		t.Fatalf("outputs busy %q spare %q", busy, spare)
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "jobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := func(pool, name string, n, secs int) {
		w.write(filepath.Join("jobs", name+".sub"), fmt.Sprintf(
			"executable = /bin/sleep\narguments = %d\nlog = %s.log\nrequest_cpus = 1\nrequest_memory = 16\nqueue %d\n", secs, name, n))
		w.expect(0, "condor", "submit", "-pool", pool, filepath.Join(w.dir, "jobs", name+".sub"))
	}
	spareHost := regexp.MustCompile(`^slot\d+(_\d+)?@spare-\d+$`)

	// Five jobs of a minute: busy runs one, spare's four slots the rest.
	const lentSecs = 60
	sub(busy, "lent", 5, lentSecs)
	eventually(t, 2*time.Minute, func() error {
		r := w.expect(0, "condor", "q", "-pool", busy, "-af", "ClusterId", "ProcId", "JobStatus", "RemoteHost")
		n := 0
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[2] == "2" && spareHost.MatchString(f[3]) {
				n++
			}
		}
		if n < 4 {
			return fmt.Errorf("%d of busy's jobs run in spare, want 4:\n%s", n, r.stdout)
		}
		return nil
	})
	full := time.Now()

	// spare's own job takes a slot back at once.
	sub(spare, "own", 1, 2)
	var host string
	eventually(t, 40*time.Second, func() error {
		r := w.expect(0, "condor", "history", "-pool", spare, "-af", "ClusterId", "ProcId", "RemoteHost")
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "1" && f[1] == "0" {
				host = f[2]
				return nil
			}
		}
		return fmt.Errorf("spare's job has not run yet")
	})
	took := time.Since(full)
	t.Logf("spare's own job ran on %s and ended %v after its slots were all lent", host, took.Round(100*time.Millisecond))
	if !spareHost.MatchString(host) {
		t.Errorf("spare's job ran on %s", host)
	}
	if took > lentSecs/2*time.Second {
		t.Errorf("spare's job ended %v after submission: it waited for a flocked job", took)
	}

	// The preempted job was evicted, went back to idle at busy, and ran
	// again: each of busy's jobs ends once.
	hist := map[string]int{}
	eventually(t, 3*time.Minute, func() error {
		r := w.expect(0, "condor", "history", "-pool", busy, "-af", "ClusterId", "ProcId")
		hist = map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				hist[f[0]+"."+f[1]]++
			}
		}
		if len(hist) < 5 {
			return fmt.Errorf("%d of busy's 5 jobs done", len(hist))
		}
		return nil
	})
	for id, n := range hist {
		if n != 1 {
			t.Errorf("job %s is %d times in busy's history", id, n)
		}
	}
	data, err := os.ReadFile(filepath.Join(w.dir, "lent.log"))
	if err != nil {
		t.Fatal(err)
	}
	count := func(ev string) map[string]int {
		seen := map[string]int{}
		for _, m := range regexp.MustCompile(`(?m)^`+ev+` \((\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(string(data), -1) {
			seen[m[1]]++
		}
		return seen
	}
	ends, evicted := count("005"), count("004")
	if len(ends) != 5 {
		t.Errorf("lent.log: %d jobs ended, want 5:\n%s", len(ends), data)
	}
	for id, n := range ends {
		if n != 1 {
			t.Errorf("lent.log: job %s ended %d times", id, n)
		}
	}
	if len(evicted) != 1 {
		t.Errorf("lent.log: jobs evicted %v, want one:\n%s", evicted, data)
	}
	for id := range evicted {
		if starts := count("001")[id]; starts != 2 {
			t.Errorf("lent.log: the evicted job %s started %d times, want 2", id, starts)
		}
	}
}
