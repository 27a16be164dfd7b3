package acceptance

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// periodicPool is a one-node pool whose schedd evaluates the jobs'
// periodic expressions every second.
const periodicPool = `
pool "periodic" {
  nodes  = 1
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5", PERIODIC_EXPR_INTERVAL = "1" }
}

output "cm" {
  value = pool.periodic.central_manager
}
`

// periodicRemove is a job that would sleep for ten minutes, removed by
// its periodic_remove after three seconds in the queue.
const periodicRemove = `
executable      = /bin/sleep
arguments       = 600
log             = periodic.log
periodic_remove = (time() - QDate) > 3
queue
`

// periodicCycle is a job held by its periodic_hold once it has been in
// the queue for two seconds, then released by its periodic_release; the
// release's ReleaseReason keeps it from being held again.
const periodicCycle = `
executable            = /bin/sleep
arguments             = 600
log                   = periodic.log
periodic_hold         = (ReleaseReason =?= undefined) && (time() - QDate) > 2
periodic_hold_reason  = "held by the periodic policy"
periodic_hold_subcode = 7
periodic_release      = HoldReasonCode == 3 && HoldReasonSubCode == 7
queue
`

// TestPeriodicPolicy submits a job whose periodic_remove removes it within
// two intervals of becoming true, with HTCondor's reason in condor
// history and the job log, and a job held by its periodic_hold (reason,
// code 3, subcode) and released by its periodic_release.
func TestPeriodicPolicy(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", periodicPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	w.write("remove.sub", periodicRemove)
	w.write("cycle.sub", periodicCycle)
	w.expect(0, "condor", "submit", "-pool", cm, "remove.sub")
	submitted := time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, "cycle.sub")

	// The expression turns true 3 s after QDate (whole seconds); with an
	// interval of 1 s the job is gone within two more intervals, give or
	// take the second QDate rounds down.
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "history", "-pool", cm, "-af", "ClusterId", "RemoveReason")
		if !strings.Contains(r.stdout, "PeriodicRemove") {
			return fmt.Errorf("job 1 not in the history yet: %s", r)
		}
		return nil
	})
	// The delay is read on the schedd's own clock (QDate to the time the
	// job entered Removed), not the test's: a loaded machine slows the
	// test's polling with condor history, not the schedd's policy.
	r := w.expect(0, "condor", "history", "-pool", cm, "-af", "QDate", "EnteredCurrentStatus")
	var qdate, removed int64
	if _, err := fmt.Sscan(r.stdout, &qdate, &removed); err != nil {
		t.Fatalf("condor history -af QDate EnteredCurrentStatus: %q: %v", r.stdout, err)
	}
	t.Logf("removed %ds after QDate (%s after the test's submit)", removed-qdate, time.Since(submitted).Round(time.Millisecond))
	if took := removed - qdate; took > 3+2+1 {
		t.Errorf("removed %ds after QDate, want within two 1 s intervals of the expression turning true (3 s), give or take a second of rounding", took)
	}
	r = w.expect(0, "condor", "history", "-pool", cm, "-af", "ClusterId", "JobStatus", "RemoveReason")
	want := "1 3 The job attribute PeriodicRemove expression '(time() - QDate) > 3' evaluated to TRUE"
	if got := strings.TrimSpace(r.stdout); got != want {
		t.Errorf("condor history: %q, want %q", got, want)
	}

	logPath := filepath.Join(w.dir, "periodic.log")
	eventually(t, 30*time.Second, func() error {
		if logEvents(t, logPath)["013"] == nil {
			return fmt.Errorf("job 2 not released yet: %v", logEvents(t, logPath))
		}
		return nil
	})
	log := readFile(t, logPath)
	for _, want := range []string{
		"009 (001.000.000)",
		"The job attribute PeriodicRemove expression '(time() - QDate) > 3' evaluated to TRUE",
		"012 (002.000.000)",
		"held by the periodic policy",
		"Code 3 Subcode 7",
		"013 (002.000.000)",
		"The job attribute PeriodicRelease expression 'HoldReasonCode == 3 && HoldReasonSubCode == 7' evaluated to TRUE",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
	counts := logEvents(t, logPath)
	if counts["012"][0] != 1 || counts["013"][0] != 1 {
		t.Errorf("holds %v, releases %v: want one of each for job 2", counts["012"], counts["013"])
	}
	// Released, job 2 stays in the queue (idle or running again).
	r = w.expect(0, "condor", "q", "-pool", cm, "-af", "ClusterId", "HoldReasonCode", "ReleaseReason")
	if !strings.HasPrefix(strings.TrimSpace(r.stdout), "2 ") || !strings.Contains(r.stdout, "PeriodicRelease") {
		t.Errorf("condor q after the release: %q", r.stdout)
	}
	w.expect(0, "condor", "rm", "-pool", cm, "-all")
}
