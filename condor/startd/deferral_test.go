package startd

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestDeferralWait: a job activated before its DeferralTime has its slot
// (Busy) at once, the activation answered at once, and its supervisor
// starts at that time, not before; whatever stops the slot's job while it
// waits stops it, and it never starts; a job later than its DeferralTime
// by more than its DeferralWindow is held with code 20.
func TestDeferralWait(t *testing.T) {
	type stop struct {
		name    string
		stop    func(s *Startd, claim string)
		vacates bool
	}
	stops := []stop{
		{name: "none"},
		{name: "release", stop: func(s *Startd, claim string) {
			_, _ = s.Release(context.Background(), &wire.ReleaseRequest{ClaimID: claim})
		}},
		{name: "vacate", vacates: true, stop: func(s *Startd, claim string) {
			_, _ = s.Vacate(context.Background(), &wire.VacateRequest{ClaimID: claim})
		}},
		{name: "drain", vacates: true, stop: func(s *Startd, claim string) { s.Drain(context.Background(), true) }},
		{name: "shutdown", stop: func(s *Startd, claim string) { s.shutdown() }},
	}
	for _, st := range stops {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			fs := &fakeSchedd{}
			schedd := fs.serve(t)
			s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "1000", "REPORT_RETRY_TIME": "5"})
			t.Cleanup(s.shutdown)
			var mu sync.Mutex
			var startedAt time.Time
			s.onStart = func(supervised bool) {
				if supervised {
					mu.Lock()
					startedAt = time.Now()
					mu.Unlock()
				}
			}
			job, arg := uniqueSleep()
			at := time.Now().Unix() + 3
			job["DeferralTime"] = strconv.FormatInt(at, 10)
			claim, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: job, Schedd: schedd})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if _, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.0", Job: job}); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(t0); d > 2*time.Second {
				t.Errorf("the activation took %v: it waited for the deferral time", d)
			}
			s.mu.Lock()
			sl := s.claims[claim.ClaimID]
			busy := sl != nil && sl.run != nil && sl.activity == "Busy"
			s.mu.Unlock()
			if !busy {
				t.Errorf("the slot of a job waiting for its deferral time is not Busy with it")
			}
			if _, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "2.0", Job: job}); err == nil {
				t.Errorf("a second activation while the job waits was accepted")
			}
			if st.stop == nil {
				eventuallyTrue(t, 10*time.Second, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return !startedAt.IsZero()
				})
				mu.Lock()
				got := startedAt
				mu.Unlock()
				if got.Before(time.Unix(at, 0)) || got.After(time.Unix(at, 0).Add(1500*time.Millisecond)) {
					t.Errorf("the job started at %v, want at %v", got, time.Unix(at, 0))
				}
				s.shutdown()
				return
			}
			st.stop(s, claim.ClaimID)
			if st.vacates {
				eventuallyTrue(t, 10*time.Second, func() bool {
					fs.mu.Lock()
					defer fs.mu.Unlock()
					for _, r := range fs.reports {
						if r.Kind == wire.ReportEvicted && r.JobID == "1.0" {
							return true
						}
					}
					return false
				})
			}
			time.Sleep(time.Until(time.Unix(at+1, 0)))
			mu.Lock()
			started := !startedAt.IsZero()
			mu.Unlock()
			if started {
				t.Errorf("a job stopped (%s) while it waited for its deferral time was started", st.name)
			}
			s.shutdown()
			if left := processesWith(arg); len(left) > 0 {
				t.Errorf("the job's processes are left: %v", left)
			}
			fs.mu.Lock()
			defer fs.mu.Unlock()
			for _, r := range fs.reports {
				if r.Kind == wire.ReportExited || r.Kind == wire.ReportHold {
					t.Errorf("report %+v of a job stopped while it waited", r)
				}
			}
		})
	}
}

// TestDeferralMissed: a job that reaches the startd later than its
// DeferralTime by more than its DeferralWindow is held (code 20) and never
// starts; one within its window starts.
func TestDeferralMissed(t *testing.T) {
	t.Parallel()
	fs := &fakeSchedd{}
	schedd := fs.serve(t)
	s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "1000", "REPORT_RETRY_TIME": "5"})
	t.Cleanup(s.shutdown)
	started := make(chan struct{}, 2)
	s.onStart = func(supervised bool) {
		if supervised {
			started <- struct{}{}
		}
	}
	job, _ := uniqueSleep()
	job["DeferralTime"] = strconv.FormatInt(time.Now().Unix()-100, 10)
	job["DeferralWindow"] = "10"
	claim, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: job, Schedd: schedd})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.0", Job: job}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, 10*time.Second, func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		for _, r := range fs.reports {
			if r.Kind == wire.ReportHold && r.JobID == "1.0" {
				if r.HoldCode != HoldCodeMissedDeferral || !strings.HasPrefix(r.HoldReason, "Job missed deferred execution time") {
					t.Errorf("hold %d %q, want %d, missed deferred execution time", r.HoldCode, r.HoldReason, HoldCodeMissedDeferral)
				}
				return true
			}
		}
		return false
	})
	select {
	case <-started:
		t.Errorf("a job that missed its deferral window was started")
	default:
	}
	// Within its window, it starts.
	job["DeferralWindow"] = "1000"
	if _, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.1", Job: job}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, started, "the job within its window to start")
}
