package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// oneSlotPool is a one-node pool of a single slot whose schedd evaluates
// the periodic policy every second.
const oneSlotPool = `
pool "one" {
  nodes  = 1
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5", PERIODIC_EXPR_INTERVAL = "1" }
}

output "cm" {
  value = pool.one.central_manager
}
`

// prioJobs are four jobs of one cluster whose priority says the order
// they run in on one slot: 1.1, 1.3, 1.2, 1.0.
const prioJobs = `
executable = /bin/true
log        = prio.log
priority   = 0
queue
priority   = 10
queue
priority   = 5
queue
priority   = 7
queue
`

const exitHoldJob = `
executable           = /bin/false
log                  = hold.log
on_exit_hold         = ExitCode != 0
on_exit_hold_reason  = strcat("exited with ", ExitCode)
on_exit_hold_subcode = 40 + ExitCode
queue
`

const leaveJob = `
executable     = /bin/true
log            = leave.log
leave_in_queue = (time() - CompletionDate) < 6
queue
`

var executeLine = regexp.MustCompile(`(?m)^001 \((\d+)\.(\d+)\.\d+\)`)

// TestSubmitPolicyCommands: on a one-slot pool, jobs run in priority
// order; on_exit_hold_reason and on_exit_hold_subcode give the hold's
// reason and subcode; leave_in_queue keeps a completed job in condor q
// until the expression turns false.
func TestSubmitPolicyCommands(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", oneSlotPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	w.write("prio.sub", prioJobs)
	r := w.expect(0, "condor", "submit", "-pool", cm, "prio.sub")
	if strings.Contains(r.stderr+r.stdout, "priority is not supported") {
		t.Errorf("priority still draws the ignored warning: %s", r)
	}
	prioLog := filepath.Join(w.dir, "prio.log")
	eventually(t, 90*time.Second, func() error {
		if n := len(logEvents(t, prioLog)["005"]); n < 4 {
			return fmt.Errorf("%d of 4 jobs done", n)
		}
		return nil
	})
	var order []string
	for _, m := range executeLine.FindAllStringSubmatch(readFile(t, prioLog), -1) {
		c, _ := strconv.Atoi(m[1])
		p, _ := strconv.Atoi(m[2])
		order = append(order, fmt.Sprintf("%d.%d", c, p))
	}
	if got, want := strings.Join(order, " "), "1.1 1.3 1.2 1.0"; got != want {
		t.Errorf("execute order %q, want %q (priority 10, 7, 5, 0)", got, want)
	}

	w.write("hold.sub", exitHoldJob)
	w.expect(0, "condor", "submit", "-pool", cm, "hold.sub")
	eventually(t, 60*time.Second, func() error {
		// Held with how it exited, for periodic_release to read.
		r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus", "HoldReasonCode", "HoldReasonSubCode", "ExitCode", "ExitBySignal", "NumJobCompletions", "HoldReason")
		if got, want := strings.TrimSpace(r.stdout), "5 3 41 1 false 1 exited with 1"; got != want {
			return fmt.Errorf("condor q: %q, want %q", got, want)
		}
		return nil
	})
	if log := readFile(t, filepath.Join(w.dir, "hold.log")); !strings.Contains(log, "exited with 1") || !strings.Contains(log, "Code 3 Subcode 41") {
		t.Errorf("hold event lacks the reason and subcode:\n%s", log)
	}
	w.expect(0, "condor", "rm", "-pool", cm, "-all")

	w.write("leave.sub", leaveJob)
	w.expect(0, "condor", "submit", "-pool", cm, "leave.sub")
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus")
		if got := strings.TrimSpace(r.stdout); got != "3 4" {
			return fmt.Errorf("condor q: %q, want the completed job 3 left in the queue", got)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus")
		if got := strings.TrimSpace(r.stdout); got != "" {
			return fmt.Errorf("condor q: %q, want the job gone to the history", got)
		}
		return nil
	})
	r = w.expect(0, "condor", "history", "-pool", cm, "-af", "ClusterId", "JobStatus", "-constraint", "ClusterId == 3")
	if got := strings.TrimSpace(r.stdout); got != "3 4" {
		t.Errorf("condor history: %q, want job 3 completed", got)
	}

	// Kept for good, then removed: to the history, no abort event.
	w.write("keep.sub", "executable = /bin/true\nlog = keep.log\nleave_in_queue = true\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "keep.sub")
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus")
		if got := strings.TrimSpace(r.stdout); got != "4 4" {
			return fmt.Errorf("condor q: %q, want the completed job 4 left in the queue", got)
		}
		return nil
	})
	w.expect(0, "condor", "rm", "-pool", cm, "4")
	r = w.expect(0, "condor", "history", "-pool", cm, "-af", "ClusterId", "JobStatus", "-constraint", "ClusterId == 4")
	if got := strings.TrimSpace(r.stdout); got != "4 3" {
		t.Errorf("condor history: %q, want job 4 removed", got)
	}
	if ev := logEvents(t, filepath.Join(w.dir, "keep.log")); len(ev["005"]) != 1 || len(ev["009"]) != 0 {
		t.Errorf("keep.log events %v: want its termination and no abort", ev)
	}
}

// TestDeferralTime: a job with a deferral_time starts no sooner (it may be
// matched and its slot claimed deferral_prep_time earlier, as in HTCondor:
// its own clock says when it ran); one whose time passed beyond its
// deferral_window is held, code 20.
func TestDeferralTime(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", oneSlotPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	at := time.Now().Unix() + 8
	w.write("defer.sub", fmt.Sprintf("executable = /bin/date\narguments = +%%s\noutput = defer.out\nlog = defer.log\ndeferral_time = %d\nqueue\n", at))
	w.write("late.sub", fmt.Sprintf("executable = /bin/true\ndeferral_time = %d\ndeferral_window = 10\nqueue\n", at-100))
	r := w.expect(0, "condor", "submit", "-pool", cm, "defer.sub")
	if strings.Contains(r.stdout+r.stderr, "deferral_time is not supported") {
		t.Errorf("deferral_time still draws the ignored warning: %s", r)
	}
	w.expect(0, "condor", "submit", "-pool", cm, "late.sub")
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "history", "-pool", cm, "-af", "JobStartDate", "DeferralTime", "-constraint", "ClusterId == 1")
		if strings.TrimSpace(r.stdout) == "" {
			return fmt.Errorf("job 1 not done: %s", r)
		}
		return nil
	})
	out, err := os.ReadFile(filepath.Join(w.dir, "defer.out"))
	if err != nil {
		t.Fatal(err)
	}
	start, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("the job's clock %q: %v", out, err)
	}
	if start < at {
		t.Errorf("job started at %d, before its deferral_time %d", start, at)
	}
	if start > at+30 {
		t.Errorf("job started at %d, %d s after its deferral_time", start, start-at)
	}
	r = w.expect(0, "condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus", "HoldReasonCode", "HoldReason")
	if got, want := strings.TrimSpace(r.stdout), "2 5 20 Job missed deferred execution time"; got != want {
		t.Errorf("condor q: %q, want %q", got, want)
	}
}

// TestAccountingGroupSubmitter: jobs of an accounting group run, and are
// advertised under the group's submitter, group.user, apart from the
// owner's other jobs.
func TestAccountingGroupSubmitter(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", oneSlotPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	w.write("group.sub", "executable = /bin/sleep\narguments = 600\naccounting_group = physics\nqueue 2\n")
	w.write("plain.sub", "executable = /bin/sleep\narguments = 600\nqueue\n")
	r := w.expect(0, "condor", "submit", "-pool", cm, "group.sub")
	if strings.Contains(r.stdout+r.stderr, "accounting_group is not supported") {
		t.Errorf("accounting_group still draws the ignored warning: %s", r)
	}
	w.expect(0, "condor", "submit", "-pool", cm, "plain.sub")
	r = w.expect(0, "condor", "q", "-pool", cm, "-af", "ClusterId", "AccountingGroup", "Owner")
	var user string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "1" {
			user = f[2]
			if f[1] != "physics."+user {
				t.Errorf("AccountingGroup %q, want physics.%s", f[1], user)
			}
		}
	}
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-submitters", "-af", "Name", "RunningJobs", "IdleJobs")
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if name, counts, ok := strings.Cut(l, " "); ok {
				name, _, _ = strings.Cut(name, "@")
				got[name] = counts
			}
		}
		// One slot: one of the three jobs runs.
		g, o := got["physics."+user], got[user]
		if g == "" || o == "" || (g != "1 1" || o != "0 1") && (g != "0 2" || o != "1 0") {
			return fmt.Errorf("submitters %v: want physics.%s with the 2 group jobs and %s with the other", got, user, user)
		}
		return nil
	})
	w.expect(0, "condor", "rm", "-pool", cm, "-all")
}

// TestCondorPrioTakesEffect: a JobPrio changed by HTCondor's own client
// (Schedd.edit, as condor_prio and condor_qedit do) reorders the idle jobs
// waiting for the one slot.
func TestCondorPrioTakesEffect(t *testing.T) {
	t.Parallel()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", oneSlotPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	w.write("blocker.sub", "executable = /bin/sleep\narguments = 600\nqueue\n")
	w.write("wait.sub", "executable = /bin/true\nlog = wait.log\nqueue 3\n")
	w.expect(0, "condor", "submit", "-pool", cm, "blocker.sub")
	w.expect(0, "condor", "submit", "-pool", cm, "wait.sub")
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus", "-constraint", "ClusterId == 1")
		if strings.TrimSpace(r.stdout) != "1 2" {
			return fmt.Errorf("blocker not running: %s", r)
		}
		return nil
	})
	out, err := htcondor(t, cm, "FS", `s = htcondor2.Schedd(htcondor2.Collector(ADDR).locate(htcondor2.DaemonType.Schedd))
s.edit('2.2', 'JobPrio', '10')
print(list(s.query(constraint='ClusterId == 2 && ProcId == 2', projection=['JobPrio']))[0]['JobPrio'])`)
	if err != nil || out != "10" {
		t.Fatalf("Schedd.edit JobPrio: %q, %v", out, err)
	}
	w.expect(0, "condor", "rm", "-pool", cm, "1")
	waitLog := filepath.Join(w.dir, "wait.log")
	eventually(t, 90*time.Second, func() error {
		if n := len(logEvents(t, waitLog)["005"]); n < 3 {
			return fmt.Errorf("%d of 3 jobs done", n)
		}
		return nil
	})
	var order []string
	for _, m := range executeLine.FindAllStringSubmatch(readFile(t, waitLog), -1) {
		c, _ := strconv.Atoi(m[1])
		p, _ := strconv.Atoi(m[2])
		order = append(order, fmt.Sprintf("%d.%d", c, p))
	}
	if got, want := strings.Join(order, " "), "2.2 2.0 2.1"; got != want {
		t.Errorf("execute order %q, want %q (2.2 raised to JobPrio 10 while waiting)", got, want)
	}
}
