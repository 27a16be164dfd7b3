package acceptance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestNegotiatorPreJobRank steers jobs among equal slots with the pool's
// NEGOTIATOR_PRE_JOB_RANK (MY the slot): ranking the slots by their
// SlotID, two jobs run on the last two of the node's six slots, where
// HTCondor's default ranks would put them on the first two.
func TestNegotiatorPreJobRank(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(limitsPool("prejobrank", `NEGOTIATOR_PRE_JOB_RANK = "MY.SlotID * (TARGET.Steered =?= true)"`))
	w.write("job.sub", "executable = /bin/sleep\narguments = 30\n+Steered = true\nqueue 2\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	var hosts []string
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus", "RemoteHost")
		hosts = hosts[:0]
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 || f[0] != "2" {
				return fmt.Errorf("both jobs do not run yet: %s", r)
			}
			hosts = append(hosts, strings.SplitN(f[1], "@", 2)[0])
		}
		if len(hosts) != 2 {
			return fmt.Errorf("both jobs do not run yet: %s", r)
		}
		return nil
	})
	sort.Strings(hosts)
	if strings.Join(hosts, " ") != "slot5 slot6" {
		t.Fatalf("the jobs run on %v; want slot5 and slot6, the slots NEGOTIATOR_PRE_JOB_RANK ranks highest", hosts)
	}
	w.run("condor", "rm", "-pool", cm, "-all")
}

// stubbornJob is a job that ignores its soft kill (SIGTERM) and would
// run for two minutes.
const stubbornJob = "#!/bin/sh\ntrap '' TERM\nexec /bin/sleep 120\n"

var evictRE = regexp.MustCompile(`(?m)^(001|004) \(001\.000\.000\) (\S+ \S+)`)

// TestRetirementThenVacate preempts a job that ignores its soft kill on a
// machine with 10 s of retirement (MAXJOBRETIREMENTTIME) and 6 s of
// vacate time (MachineMaxVacateTime): as HTCondor's startd, pond
// soft-kills it 6 s before its retirement ends, so that it is hard-killed
// (evicted) when its retirement ends, 10 s after it started, not 16.
func TestRetirementThenVacate(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(singleSlotPool("retvac",
		`RANK = "TARGET.Preferred =?= true", MachineMaxVacateTime = "6", MAXJOBRETIREMENTTIME = "10"`))
	w.writeExec("stubborn.sh", stubbornJob)
	w.write("long.sub", "executable = stubborn.sh\nlog = jobs.log\nqueue\n")
	submitThenPrefer(t, w, cm)
	log := filepath.Join(w.dir, "jobs.log")
	waitEvicted(t, log, 60*time.Second)
	var started, evicted time.Time
	for _, m := range evictRE.FindAllStringSubmatch(readFile(t, log), -1) {
		at, err := time.ParseInLocation("2006-01-02 15:04:05", m[2], time.Local)
		if err != nil {
			t.Fatalf("event time %q: %v", m[2], err)
		}
		if m[1] == "001" && started.IsZero() {
			started = at
		}
		if m[1] == "004" && evicted.IsZero() {
			evicted = at
		}
	}
	// The log's times are whole seconds.
	if d := evicted.Sub(started); d < 9*time.Second || d > 13*time.Second {
		t.Fatalf("the job was evicted %v after it started; want at the end of its 10 s of retirement:\n%s", d, readFile(t, log))
	}
	w.run("condor", "rm", "-pool", cm, "-all")
}

// TestWantVacateFalse preempts a job that ignores its soft kill on a
// machine with WANT_VACATE = False and 30 s of vacate time: as HTCondor's
// startd, pond skips the soft kill and kills the job at once, so the
// preferring job runs within a cycle or two, not after 30 s.
func TestWantVacateFalse(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(singleSlotPool("novac",
		`RANK = "TARGET.Preferred =?= true", MachineMaxVacateTime = "30", WANT_VACATE = "False"`))
	w.writeExec("stubborn.sh", stubbornJob)
	w.write("long.sub", "executable = stubborn.sh\nlog = jobs.log\nqueue\n")
	submitted := submitThenPrefer(t, w, cm)
	log := filepath.Join(w.dir, "jobs.log")
	waitEvicted(t, log, 60*time.Second)
	if d := time.Since(submitted); d > 15*time.Second {
		t.Fatalf("the job was evicted %v after the preferred one was submitted; want at once (a cycle or two of 2 s), "+
			"not after its 30 s of vacate time:\n%s", d, readFile(t, log))
	}
	w.run("condor", "rm", "-pool", cm, "-all")
}
