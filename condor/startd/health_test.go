package startd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/wire"
)

// partitionableClaim returns the claim id of s's partitionable slot.
// claimAndActivate claims a slot of the partitionable slot's claim pclaim
// for job on behalf of the schedd at schedd, and starts job jobID on it.
func claimAndActivate(t *testing.T, s *Startd, pclaim, schedd string, job wire.Ad, jobID string) *wire.ClaimResponse {
	t.Helper()
	ctx := context.Background()
	c, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: job, Schedd: schedd, ScheddName: "schedd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: c.ClaimID, JobID: jobID, Job: job}); err != nil {
		t.Fatal(err)
	}
	return c
}

func partitionableClaim(t *testing.T, s *Startd) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sl := range s.claims {
		if sl.partitionable {
			return id
		}
	}
	t.Fatal("no partitionable slot")
	return ""
}

func testJob(extra map[string]string) wire.Ad {
	job := wire.Ad{"Owner": `"alice"`, "RequestCpus": "1", "RequestMemory": "100", "RequestDisk": "10", "Requirements": "true"}
	for k, v := range extra {
		job[k] = v
	}
	return job
}

// TestJudgeCompletionKinds checks which ends of a job count against the
// machine: only a start that failed through the machine's own fault, never
// an exit code or a signal of the job's own program, however fast.
func TestJudgeCompletionKinds(t *testing.T) {
	h := health{failures: 3}
	for _, tt := range []struct {
		name        string
		r           *wire.JobReport
		startFailed bool
		want        outcome
	}{
		{"exit 0", &wire.JobReport{Kind: wire.ReportExited, WallClock: 0.1}, false, healthy},
		{"exit 1 at once", &wire.JobReport{Kind: wire.ReportExited, ExitCode: 1, WallClock: 0.1}, false, healthy},
		{"exit 127 at once", &wire.JobReport{Kind: wire.ReportExited, ExitCode: 127}, false, healthy},
		{"exit 1 after a while", &wire.JobReport{Kind: wire.ReportExited, ExitCode: 1, WallClock: 3600}, false, healthy},
		{"SIGSEGV of the job", &wire.JobReport{Kind: wire.ReportExited, Signal: 11, WallClock: 0.2}, false, healthy},
		{"SIGKILL of the job", &wire.JobReport{Kind: wire.ReportExited, Signal: 9}, false, healthy},
		{"SIGABRT of the job", &wire.JobReport{Kind: wire.ReportExited, Signal: 6}, false, healthy},
		{"vacated", &wire.JobReport{Kind: wire.ReportEvicted, Reason: "PREEMPT policy"}, false, neutral},
		{"held over its memory", &wire.JobReport{Kind: wire.ReportHold, HoldCode: HoldCodeOutOfResources}, false, neutral},
		{"held: output transfer failed", &wire.JobReport{Kind: wire.ReportHold, HoldCode: 12}, false, neutral},
		{"held at start: no such executable", &wire.JobReport{Kind: wire.ReportHold, HoldCode: 13, HoldReason: "no such file"}, true, neutral},
		{"held at start: bad arguments", &wire.JobReport{Kind: wire.ReportHold, HoldCode: 6}, true, neutral},
		{"scratch directory not writable", &wire.JobReport{Kind: wire.ReportEvicted, Reason: "no space left on device"}, true, nodeFault},
		{"input file not written", &wire.JobReport{Kind: wire.ReportEvicted, Reason: "receiving input file x: read-only file system"}, true, nodeFault},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, what := h.judge(tt.r, tt.startFailed)
			if got != tt.want {
				t.Fatalf("judge = %v, want %v", got, tt.want)
			}
			if (got == nodeFault) != (what != "") {
				t.Errorf("judge says %q", what)
			}
		})
	}
}

// TestExecFault checks whose fault a real failure to exec is.
func TestExecFault(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plain")
	garbage := filepath.Join(dir, "garbage")
	badInterp := filepath.Join(dir, "interp")
	for p, text := range map[string]string{notExec: "#!/bin/sh\n", garbage: "\x00\x01\x02not a program", badInterp: "#!/no/such/shell\n"} {
		mode := os.FileMode(0o755)
		if p == notExec {
			mode = 0o644
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	// Through the job's supervisor, as the starter runs jobs: the error
	// of its exec crosses the supervisor's status pipe.
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	execErr := func(path string) error {
		p, err := startSupervisor(isolation{}, jobshim.Spec{Path: path, Args: []string{path}, Dir: dir}, null, null, null)
		if err == nil {
			p.kill()
			t.Fatalf("%s started", path)
		}
		return err
	}
	for _, tt := range []struct {
		name        string
		err         error
		transferred bool
		machine     bool
	}{
		{"a transferred executable the machine cannot exec", execErr(notExec), true, true},
		{"the job's own Cmd it may not exec", execErr(notExec), false, false},
		{"no such executable", execErr(filepath.Join(dir, "missing")), false, false},
		{"a transferred file that is no program", execErr(garbage), true, false},
		{"a missing interpreter", execErr(badInterp), true, false},
		{"out of processes", fmt.Errorf("starting x: %w", syscall.EAGAIN), false, true},
		{"out of memory", fmt.Errorf("starting x: %w", syscall.ENOMEM), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := isMachineFault(execFault(tt.err, tt.transferred)); got != tt.machine {
				t.Errorf("execFault(%v) is the machine's: %v, want %v", tt.err, got, tt.machine)
			}
		})
	}
}

// TestQuarantineAfterNodeFaults runs jobs on a startd whose execute
// directory is broken (a file stands where it should be), as a machine
// whose file system failed: every start fails through the machine's
// fault, and the third in a row quarantines it, whatever the jobs'
// clusters. Before it, jobs that fail at once with their own exit code or
// signal quarantine nothing.
func TestQuarantineAfterNodeFaults(t *testing.T) {
	// No schedd hears the reports: they are not retried for long.
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000", "REPORT_RETRY_TIME": "1",
		KnobBlackholeFailures: "3", KnobQuarantineTime: "600"})
	var mu sync.Mutex
	var told []*Quarantine
	s.opts.OnQuarantine = func(q *Quarantine) {
		mu.Lock()
		told = append(told, q)
		mu.Unlock()
	}
	now := time.Now()
	s.now = func() time.Time { return now }
	note := func(r *wire.JobReport, startFailed bool) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.noteOutcomeLocked(r, startFailed)
	}
	// Ten jobs of ten clusters that fail at once, by exit code or signal.
	for i := range 10 {
		r := &wire.JobReport{JobID: strconv.Itoa(i) + ".0", Kind: wire.ReportExited, ExitCode: 1 + i%2, WallClock: 0.1}
		if i%3 == 0 {
			r.ExitCode, r.Signal = 0, 11
		}
		if note(r, false) {
			t.Fatalf("quarantined after %+v", r)
		}
	}
	// Real starts on a broken execute directory.
	if err := os.RemoveAll(s.ExecuteDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.ExecuteDir(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if q := s.Quarantined(); q != nil {
			t.Fatalf("quarantined after %d faults", i)
		}
		claim, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "20." + strconv.Itoa(i),
			Job: testJob(map[string]string{"Cmd": `"/bin/true"`})})
		if err != nil {
			t.Fatalf("activate: %v", err)
		}
		if i < 2 {
			s.mu.Lock()
			s.releaseLocked(s.claims[claim.ClaimID])
			s.mu.Unlock()
		}
	}
	// The hook hears of it on its own goroutine.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(told)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	q := s.Quarantined()
	if q == nil || !strings.Contains(q.Reason, "3 jobs in a row could not start") || !strings.Contains(q.Reason, "scratch directory") ||
		!q.Until.Equal(now.Add(600*time.Second)) {
		t.Fatalf("quarantine = %+v", q)
	}
	ad := s.Slots()[0]
	if b, _ := ad.EvalAttr("PondQuarantined").BoolValue(); !b {
		t.Errorf("slot ad: PondQuarantined = %v", ad.EvalAttr("PondQuarantined"))
	}
	if r, _ := ad.EvalAttr("PondQuarantineReason").StringValue(); r != q.Reason {
		t.Errorf("slot ad: PondQuarantineReason = %q, want %q", r, q.Reason)
	}
	if st, _ := ad.EvalAttr("State").StringValue(); st != "Owner" {
		t.Errorf("slot ad: State = %q, want Owner", st)
	}
	job, _ := wire.ToClassAd(testJob(nil))
	if classad.Match(job, ad) {
		t.Errorf("the quarantined slot's START matches a job")
	}
	_, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil)})
	if !errors.Is(err, wire.ErrConflict) || !strings.Contains(err.Error(), "quarantined") {
		t.Errorf("claim of a quarantined machine: %v", err)
	}

	// The time is up: the quarantine lifts.
	now = now.Add(601 * time.Second)
	s.checkHealth()
	if q := s.Quarantined(); q != nil {
		t.Fatalf("still quarantined after its time: %+v", q)
	}
	ad = s.Slots()[0]
	if _, ok := ad.Lookup("PondQuarantined"); ok {
		t.Errorf("slot ad still has PondQuarantined")
	}
	if !classad.Match(job, ad) {
		t.Errorf("the slot's START does not match a job after the quarantine")
	}
	if _, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil)}); err != nil {
		t.Errorf("claim after the quarantine: %v", err)
	}

	// Node faults of a single cluster's jobs quarantine it as well: they
	// are the machine's.
	for i := range 3 {
		note(&wire.JobReport{JobID: "7." + strconv.Itoa(i), Kind: wire.ReportEvicted, Reason: "no space left on device"}, true)
	}
	if s.Quarantined() == nil {
		t.Fatal("not quarantined again")
	}
	// An administrator lifts a quarantine at once.
	if !s.Lift("test") || s.Quarantined() != nil || s.Lift("again") {
		t.Errorf("Lift did not lift the quarantine once")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 3 || told[0] == nil || told[1] != nil || told[2] != nil {
		t.Errorf("OnQuarantine told %v, want a quarantine, then two lifts", told)
	}
}

func TestBlackholeCheckOff(t *testing.T) {
	s := newStartd(t, map[string]string{KnobBlackholeFailures: "0"})
	for i := range 20 {
		s.mu.Lock()
		q := s.noteOutcomeLocked(&wire.JobReport{JobID: "1." + strconv.Itoa(i), Kind: wire.ReportEvicted, Reason: "disk full"}, true)
		s.mu.Unlock()
		if q {
			t.Fatal("quarantined with POND_BLACKHOLE_FAILURES = 0")
		}
	}
}

func TestBadHealthKnobs(t *testing.T) {
	for knob, v := range map[string]string{KnobBlackholeFailures: "-1",
		KnobQuarantineTime: "-5", KnobEndTime: "tomorrow", KnobEndGrace: "-1", KnobMaxJobs: "-1"} {
		cfg := mustConfig(t, map[string]string{knob: v})
		_, err := New(Options{Config: cfg, Name: "node1", Address: "127.0.0.1:1", DataDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), knob) {
			t.Errorf("%s = %s: error %v, want one naming the knob", knob, v, err)
		}
	}
}

// TestEndTimeRefusesLongJobs checks that the startd's own refusal and the
// START it advertises (what the negotiator matches) agree on which jobs
// end before the machine does.
func TestEndTimeRefusesLongJobs(t *testing.T) {
	end := time.Now().Add(time.Hour).Truncate(time.Second)
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000",
		KnobEndTime: strconv.FormatInt(end.Unix(), 10), KnobEndGrace: "300"})
	tests := []struct {
		name string
		job  map[string]string
		at   time.Duration // before the end
		ok   bool
	}{
		{"no declared runtime", nil, time.Hour - time.Minute, true},
		{"fits", map[string]string{"AllowedJobDuration": "1800"}, time.Hour - time.Minute, true},
		{"too long", map[string]string{"AllowedJobDuration": "7200"}, time.Hour - time.Minute, false},
		{"execute duration too long", map[string]string{"AllowedExecuteDuration": "3600"}, 50 * time.Minute, false},
		{"retirement expectation", map[string]string{"MaxJobRetirementTime": "600"}, 20 * time.Minute, true},
		{"retirement expectation too long", map[string]string{"MaxJobRetirementTime": "1500"}, 20 * time.Minute, false},
		{"within the grace", nil, 4 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := end.Add(-tt.at)
			s.now = func() time.Time { return at }
			job, err := wire.ToClassAd(testJob(tt.job))
			if err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			refusal := s.refusalLocked(job)
			s.mu.Unlock()
			if (refusal == nil) != tt.ok {
				t.Errorf("refusal = %v, want ok %v", refusal, tt.ok)
			}
			if refusal != nil && !strings.Contains(refusal.Error(), "PondEndTime") {
				t.Errorf("refusal %q does not name PondEndTime", refusal)
			}
			// The advertised START, evaluated at the same time.
			ad := s.Slots()[0]
			if got, _ := ad.EvalAttr("PondEndTime").IntValue(); got != end.Unix() {
				t.Errorf("PondEndTime = %d, want %d", got, end.Unix())
			}
			ad.SetInt("PondEndTime", end.Unix()+int64(time.Since(at).Seconds()))
			if got := classad.Match(job, ad); got != tt.ok {
				t.Errorf("START matches: %v, want %v", got, tt.ok)
			}
		})
	}
}

func TestReconfigEndTime(t *testing.T) {
	s := newStartd(t, nil)
	if !s.EndTime().IsZero() {
		t.Fatalf("end time %v without POND_END_TIME", s.EndTime())
	}
	if _, ok := s.Slots()[0].Lookup("PondEndTime"); ok {
		t.Errorf("PondEndTime advertised without an end time")
	}
	end := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	if err := s.Reconfig(mustConfig(t, map[string]string{KnobEndTime: strconv.FormatInt(end.Unix(), 10)})); err != nil {
		t.Fatal(err)
	}
	if !s.EndTime().Equal(end) {
		t.Errorf("end time %v after reconfig, want %v", s.EndTime(), end)
	}
	if got, _ := s.Slots()[0].EvalAttr("PondEndTime").IntValue(); got != end.Unix() {
		t.Errorf("PondEndTime = %d, want %d", got, end.Unix())
	}
	if err := s.Reconfig(mustConfig(t, map[string]string{KnobEndTime: "never"})); err == nil || !strings.Contains(err.Error(), KnobEndTime) {
		t.Errorf("reconfig with a bad end time: %v", err)
	}
	if !s.EndTime().Equal(end) {
		t.Errorf("a refused reconfig changed the end time to %v", s.EndTime())
	}
}
