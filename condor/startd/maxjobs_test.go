package startd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// TestMaxJobs checks a machine of POND_MAX_JOBS = 2: its second job ends
// every claim (an idle one at once), and from then it takes no claim, no
// activation (not even on a claim it granted before, the race of a match
// made on an older ad) and no input files, advertises Draining with a
// START that matches no job, and reports its jobs spent once the last has
// ended.
func TestMaxJobs(t *testing.T) {
	// No schedd hears the reports: they are not retried for long.
	s := newStartd(t, map[string]string{"NUM_CPUS": "3", "MEMORY": "900", "REPORT_RETRY_TIME": "1", KnobMaxJobs: "2"})
	ctx := context.Background()
	pclaim := partitionableClaim(t, s)
	claim := func() string {
		t.Helper()
		c, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: testJob(nil), Schedd: "127.0.0.1:1", ScheddName: "schedd"})
		if err != nil {
			t.Fatal(err)
		}
		return c.ClaimID
	}
	c1, c2, c3 := claim(), claim(), claim()
	activate := func(c, id, secs string) error {
		_, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: c, JobID: id,
			Job: testJob(map[string]string{"Cmd": `"/bin/sleep"`, "Arguments": `"` + secs + `"`})})
		return err
	}
	if err := activate(c1, "1.0", "0"); err != nil {
		t.Fatalf("first job: %v", err)
	}
	if s.JobsSpent() {
		t.Fatal("spent after one job of two")
	}
	job, _ := wire.ToClassAd(testJob(nil))
	for _, ad := range s.Slots() {
		if d, _ := ad.EvalAttr("Draining").BoolValue(); d {
			t.Fatalf("%v draining after one job of two", ad.EvalAttr("Name"))
		}
	}
	if err := activate(c2, "2.0", "1"); err != nil {
		t.Fatalf("second job: %v", err)
	}
	if n := s.JobStarts(); n != 2 {
		t.Errorf("JobStarts = %d, want 2", n)
	}
	if s.JobsSpent() {
		t.Fatal("spent while the last job runs")
	}
	// The idle claim went back at once: a schedd activating it hears
	// the claim is unknown; the others refuse as the machine is spent.
	for _, c := range []string{c3, c1} {
		err := activate(c, "3.0", "0")
		if !errors.Is(err, wire.ErrConflict) && !errors.Is(err, wire.ErrNotFound) {
			t.Errorf("activation on claim %s after the last job: %v, want a refusal", c, err)
		}
		if errors.Is(err, wire.ErrConflict) && !strings.Contains(err.Error(), KnobMaxJobs) {
			t.Errorf("refusal %q does not name %s", err, KnobMaxJobs)
		}
	}
	s.mu.Lock()
	_, c3held := s.claims[c3]
	s.mu.Unlock()
	if c3held {
		t.Error("the idle claim is still held after the last job")
	}
	if _, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: testJob(nil)}); !errors.Is(err, wire.ErrConflict) ||
		!strings.Contains(err.Error(), KnobMaxJobs) {
		t.Errorf("claim after the last job: %v, want a refusal naming %s", err, KnobMaxJobs)
	}
	for _, ad := range s.Slots() {
		name, _ := ad.EvalAttr("Name").StringValue()
		if d, _ := ad.EvalAttr("Draining").BoolValue(); !d {
			t.Errorf("%s: Draining = %v, want true", name, ad.EvalAttr("Draining"))
		}
		if n, _ := ad.EvalAttr("PondJobStarts").IntValue(); n != 2 {
			t.Errorf("%s: PondJobStarts = %v, want 2", name, ad.EvalAttr("PondJobStarts"))
		}
		if typ, _ := ad.EvalAttr("SlotType").StringValue(); typ == "Partitionable" && classad.Match(job, ad) {
			t.Errorf("%s: START still matches a job", name)
		}
	}
	for deadline := time.Now().Add(15 * time.Second); !s.JobsSpent(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not spent 15s after the last job's start")
		}
	}
	s.mu.Lock()
	for id, sl := range s.claims {
		if !sl.partitionable && sl.state == "Claimed" {
			t.Errorf("claim %s of %s still held once every job ended", id, sl.name)
		}
	}
	s.mu.Unlock()
}

// TestMaxJobsUnset checks that with no POND_MAX_JOBS (or 0) a machine
// takes job after job and never reports its jobs spent.
func TestMaxJobsUnset(t *testing.T) {
	for _, limit := range []string{"", "0"} {
		knobs := map[string]string{"NUM_CPUS": "1", "MEMORY": "500", "REPORT_RETRY_TIME": "1"}
		if limit != "" {
			knobs[KnobMaxJobs] = limit
		}
		s := newStartd(t, knobs)
		c, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			_, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: c.ClaimID, JobID: "1." + strconv.Itoa(i),
				Job: testJob(map[string]string{"Cmd": `"/bin/true"`})})
			if err != nil {
				t.Fatalf("%s=%q: job %d: %v", KnobMaxJobs, limit, i, err)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				s.mu.Lock()
				sl := s.claims[c.ClaimID]
				busy := sl == nil || sl.run != nil || sl.reporting
				s.mu.Unlock()
				if sl == nil {
					t.Fatalf("%s=%q: the claim ended after job %d", KnobMaxJobs, limit, i)
				}
				if !busy {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s=%q: job %d did not end", KnobMaxJobs, limit, i)
				}
			}
			if s.JobsSpent() {
				t.Fatalf("%s=%q: spent after %d jobs", KnobMaxJobs, limit, i+1)
			}
		}
	}
}
