package acceptance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// preemptPool is a one-node pool of one slot whose machine prefers jobs
// with Preferred = true (RANK), with the knobs given.
func preemptPool(name, knobs string) string {
	return singleSlotPool(name, `RANK = "TARGET.Preferred =?= true", MachineMaxVacateTime = "2", `+knobs)
}

// singleSlotPool is limitsPool's pool with one slot in place of six.
func singleSlotPool(name, knobs string) string {
	return strings.Replace(limitsPool(name, knobs), "slots  = 6", "slots  = 1", 1)
}

// preferredSub is the submit description of a job of a second, logged to
// jobs.log, that a preemptPool machine's RANK prefers.
const preferredSub = "executable = /bin/sleep\narguments = 1\nlog = jobs.log\n+Preferred = true\nqueue\n"

// submitThenPrefer submits long.sub, which the test wrote, waits until
// its job runs, then submits preferredSub (as pref.sub), and returns when
// it did so.
func submitThenPrefer(t *testing.T, w *workdir, cm string) (submitted time.Time) {
	t.Helper()
	w.write("pref.sub", preferredSub)
	w.expect(0, "condor", "submit", "-pool", cm, "long.sub")
	eventually(t, 60*time.Second, func() error {
		if r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus"); strings.TrimSpace(r.stdout) != "2" {
			return fmt.Errorf("the long job does not run yet: %s", r)
		}
		return nil
	})
	submitted = time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, "pref.sub")
	return submitted
}

// waitEvicted waits until the job log says that the job of cluster 1 was
// evicted (004).
func waitEvicted(t *testing.T, log string, within time.Duration) {
	t.Helper()
	eventually(t, within, func() error {
		if evs := events(t, log); count(evs["001"], "004") == 0 {
			return fmt.Errorf("the long job was not evicted: %v", evs)
		}
		return nil
	})
}

var logEventRE = regexp.MustCompile(`(?m)^(\d{3}) \((\d+)\.(\d+)\.\d+\)`)

// events returns the job log's event codes of each cluster, in order.
func events(t *testing.T, log string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range logEventRE.FindAllStringSubmatch(readFile(t, log), -1) {
		out[m[2]] = append(out[m[2]], m[1])
	}
	return out
}

func count(evs []string, code string) int {
	n := 0
	for _, e := range evs {
		if e == code {
			n++
		}
	}
	return n
}

// TestRankPreemption runs a long job on a pool's one slot, then submits a
// job the machine's RANK prefers: within a negotiation cycle or two the
// running job is evicted (004) and goes back to idle, the preferred job
// runs, and then the evicted one runs again to its end, each exactly once.
func TestRankPreemption(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(preemptPool("rankpre", ""))
	w.write("long.sub", "executable = /bin/sleep\narguments = 8\nlog = jobs.log\nqueue\n")
	submitted := submitThenPrefer(t, w, cm)
	log := filepath.Join(w.dir, "jobs.log")
	waitEvicted(t, log, 30*time.Second)
	if d := time.Since(submitted); d > 12*time.Second {
		t.Errorf("the eviction took %v; want a cycle or two (2 s each)", d)
	}
	waitEmpty(t, w, cm)
	evs := events(t, log)
	if count(evs["001"], "005") != 1 || count(evs["002"], "005") != 1 || count(evs["001"], "004") != 1 || count(evs["002"], "004") != 0 {
		t.Fatalf("events %v; want each job to end once, the long one evicted once:\n%s", evs, readFile(t, log))
	}
	// The preferred job ran before the evicted one ran again.
	text := readFile(t, log)
	if strings.Index(text, "005 (002.") > strings.LastIndex(text, "001 (001.") {
		t.Errorf("the evicted job ran again before the preferred one ended:\n%s", text)
	}
}

// TestRetirementBeforePreemption gives the machine a retirement time
// (MAXJOBRETIREMENTTIME) longer than the running job: the job it
// preempts finishes before the preferred one starts, and is not evicted.
func TestRetirementBeforePreemption(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(preemptPool("retire", `MAXJOBRETIREMENTTIME = "60"`))
	w.write("long.sub", "executable = /bin/sleep\narguments = 6\nlog = jobs.log\nqueue\n")
	submitThenPrefer(t, w, cm)
	waitEmpty(t, w, cm)
	log := filepath.Join(w.dir, "jobs.log")
	evs := events(t, log)
	text := readFile(t, log)
	if count(evs["001"], "004") != 0 || count(evs["001"], "005") != 1 || count(evs["002"], "005") != 1 {
		t.Fatalf("events %v; want both to end once, none evicted:\n%s", evs, text)
	}
	if strings.Index(text, "005 (001.") > strings.Index(text, "001 (002.") {
		t.Errorf("the preferred job started before the retiring one ended:\n%s", text)
	}
}
