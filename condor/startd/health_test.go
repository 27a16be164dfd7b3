package startd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// partitionableClaim returns the claim id of s's partitionable slot.
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

func TestQuarantineAfterFastFailures(t *testing.T) {
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000",
		KnobBlackholeFailures: "3", KnobBlackholeRuntime: "10", KnobQuarantineTime: "600"})
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
	fast := func(code int) *wire.JobReport {
		return &wire.JobReport{JobID: "1." + strconv.Itoa(code), Kind: wire.ReportExited, ExitCode: code, WallClock: 0.2}
	}
	// What does not count, or starts the count again.
	for i, tt := range []struct {
		r           *wire.JobReport
		startFailed bool
	}{
		{fast(1), false},
		{fast(2), false},
		{&wire.JobReport{JobID: "2.0", Kind: wire.ReportExited, ExitCode: 0, WallClock: 0.1}, false}, // succeeded: again from 0
		{fast(1), false},
		{&wire.JobReport{JobID: "2.1", Kind: wire.ReportEvicted, WallClock: 0.1}, false}, // says nothing
		{&wire.JobReport{JobID: "2.2", Kind: wire.ReportHold, HoldCode: HoldCodeOutOfResources}, false},
		{fast(1), false},
		{&wire.JobReport{JobID: "2.3", Kind: wire.ReportExited, ExitCode: 1, WallClock: 30}, false}, // ran a while: again from 0
	} {
		if note(tt.r, tt.startFailed) {
			t.Fatalf("step %d: quarantined after %+v", i, tt.r)
		}
	}
	if s.Quarantined() != nil {
		t.Fatal("quarantined too early")
	}
	// Three in a row: a signal, a start failure, an exit code.
	note(&wire.JobReport{JobID: "3.0", Kind: wire.ReportExited, Signal: 11, WallClock: 0.5}, false)
	note(&wire.JobReport{JobID: "3.1", Kind: wire.ReportEvicted, Reason: "no space left on device"}, true)
	if !note(fast(127), false) {
		t.Fatal("not quarantined after three fast failures in a row")
	}
	s.quarantineChanged()
	q := s.Quarantined()
	if q == nil || !strings.Contains(q.Reason, "3 jobs in a row failed") || !strings.Contains(q.Reason, "exited with code 127") ||
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

	// Failures of a single cluster's jobs do not quarantine the machine:
	// they say more of the jobs.
	for i := range 10 {
		if note(&wire.JobReport{JobID: "7." + strconv.Itoa(i), Kind: wire.ReportExited, ExitCode: 1}, false) {
			t.Fatal("quarantined for the failures of one cluster")
		}
	}
	// An administrator lifts a quarantine at once.
	note(&wire.JobReport{JobID: "8.0", Kind: wire.ReportExited, ExitCode: 1}, false)
	if s.Quarantined() == nil {
		t.Fatal("not quarantined again")
	}
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
		q := s.noteOutcomeLocked(&wire.JobReport{JobID: "1." + strconv.Itoa(i), Kind: wire.ReportExited, ExitCode: 1}, false)
		s.mu.Unlock()
		if q {
			t.Fatal("quarantined with POND_BLACKHOLE_FAILURES = 0")
		}
	}
}

func TestBadHealthKnobs(t *testing.T) {
	for knob, v := range map[string]string{KnobBlackholeFailures: "-1", KnobBlackholeRuntime: "soon",
		KnobQuarantineTime: "-5", KnobEndTime: "tomorrow", KnobEndGrace: "-1"} {
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
