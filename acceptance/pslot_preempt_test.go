package acceptance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var procEventRE = regexp.MustCompile(`(?m)^(\d{3}) \((\d+)\.(\d+)\.\d+\)`)

// procEvents returns the job log's event codes of each job (cluster.proc),
// in order.
func procEvents(t *testing.T, log string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range procEventRE.FindAllStringSubmatch(readFile(t, log), -1) {
		id := strings.TrimLeft(m[2], "0") + "." + strings.TrimLeft(m[3], "0")
		if strings.HasSuffix(id, ".") {
			id += "0"
		}
		out[id] = append(out[id], m[1])
	}
	return out
}

// TestPslotPreemption runs two 1-cpu jobs on a pool's one partitionable
// slot of 2 cpus, then submits a 2-cpu job the machine's RANK prefers,
// with ALLOW_PSLOT_PREEMPTION: both dynamic slots are preempted at once
// (a 004 for each job), the preferred job runs on a dynamic slot carved
// from their cpus, and the evicted jobs then run again to their end,
// each exactly once.
func TestPslotPreemption(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(preemptPool("pslotpre", `ALLOW_PSLOT_PREEMPTION = "true", `+
		`NUM_CPUS = "2", NUM_SLOTS_TYPE_1 = "1", SLOT_TYPE_1 = "100%", SLOT_TYPE_1_PARTITIONABLE = "true"`))
	w.write("long.sub", "executable = /bin/sleep\narguments = 15\nrequest_cpus = 1\nrequest_memory = 64\nlog = jobs.log\nqueue 2\n")
	w.write("big.sub", "executable = /bin/sleep\narguments = 1\nrequest_cpus = 2\nrequest_memory = 64\nlog = jobs.log\n+Preferred = true\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "long.sub")
	eventually(t, 60*time.Second, func() error {
		if r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus"); strings.Join(strings.Fields(r.stdout), " ") != "2 2" {
			return fmt.Errorf("the two 1-cpu jobs do not both run yet: %s", r)
		}
		return nil
	})
	w.expect(0, "condor", "submit", "-pool", cm, "big.sub")
	log := filepath.Join(w.dir, "jobs.log")
	eventually(t, 30*time.Second, func() error {
		if evs := procEvents(t, log); count(evs["1.0"], "004") == 0 || count(evs["1.1"], "004") == 0 {
			return fmt.Errorf("the 1-cpu jobs were not both evicted: %v", evs)
		}
		return nil
	})
	waitEmpty(t, w, cm)
	evs := procEvents(t, log)
	text := readFile(t, log)
	for _, id := range []string{"1.0", "1.1"} {
		if count(evs[id], "004") != 1 || count(evs[id], "005") != 1 {
			t.Errorf("job %s: events %v; want it evicted once and ended once:\n%s", id, evs[id], text)
		}
	}
	if count(evs["2.0"], "004") != 0 || count(evs["2.0"], "005") != 1 {
		t.Errorf("the 2-cpu job: events %v; want it to end once, never evicted:\n%s", evs["2.0"], text)
	}
	// It ran before the evicted ones ran again: on the cpus they left.
	if i := strings.Index(text, "001 (002."); i < 0 || i > strings.Index(text, "005 (001.") {
		t.Errorf("the 2-cpu job did not start before the evicted jobs ended:\n%s", text)
	}
}
