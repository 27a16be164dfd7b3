package schedd

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestDeferralTime: a job is offered to the negotiator no sooner than its
// deferral_time less its deferral_prep_time (300 s when unset), and as soon
// as that time comes; one whose time passed by more than its deferral_window
// before the schedd could offer it is held (code 20, as HTCondor); one
// within its window, or without a deferral time, is offered at once.
func TestDeferralTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestSchedd(t)
	now := time.Now().Unix()
	tests := []struct {
		name           string
		time, window   string // DeferralTime, DeferralWindow ("": unset)
		prep           string // DeferralPrepTime ("": unset)
		idleNow, held  bool
		idleAfterwards bool
		notBefore      int64 // the job is not offered before (0: any time)
	}{
		{"none", "", "", "", true, false, true, 0},
		{"to come, no prep time", strconv.FormatInt(now+3, 10), "", "0", false, false, true, now + 3},
		{"to come, an expression", "time() + 3", "", "0", false, false, true, now + 3},
		{"to come within the default prep time", strconv.FormatInt(now+100, 10), "", "", true, false, true, 0},
		{"to come within the prep time", strconv.FormatInt(now+100, 10), "", "120", true, false, true, 0},
		{"prep time to come", strconv.FormatInt(now+6, 10), "", "3", false, false, true, now + 3},
		{"beyond the default prep time", strconv.FormatInt(now+303, 10), "", "", false, false, true, now + 3},
		{"a negative prep time", strconv.FormatInt(now+100, 10), "", "-5", true, false, true, 0},
		{"passed beyond the window", strconv.FormatInt(now-100, 10), "10", "", false, true, false, 0},
		{"passed, no window", strconv.FormatInt(now-100, 10), "", "", false, true, false, 0},
		{"passed within the window", strconv.FormatInt(now-5, 10), "60", "", true, false, true, 0},
		{"not a number", `"soon"`, "", "", true, false, true, 0},
	}
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []wire.Ad
	for _, tt := range tests {
		a := wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1"}
		if tt.time != "" {
			a["DeferralTime"] = tt.time
		}
		if tt.window != "" {
			a["DeferralWindow"] = tt.window
		}
		if tt.prep != "" {
			a["DeferralPrepTime"] = tt.prep
		}
		jobs = append(jobs, a)
	}
	if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	idle := func(proc int) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.idle.get(jobqueue.JobID{Cluster: nc.Cluster, Proc: proc}) != nil
	}
	for proc, tt := range tests {
		if got := idle(proc); got != tt.idleNow {
			t.Errorf("%s: offered at submission %v, want %v", tt.name, got, tt.idleNow)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for proc, tt := range tests {
		id := jobqueue.JobID{Cluster: nc.Cluster, Proc: proc}
		for time.Now().Before(deadline) && idle(proc) != tt.idleAfterwards {
			time.Sleep(50 * time.Millisecond)
		}
		if got := idle(proc); got != tt.idleAfterwards {
			t.Errorf("%s: offered later %v, want %v", tt.name, got, tt.idleAfterwards)
		}
		if tt.notBefore != 0 && time.Now().Unix() < tt.notBefore {
			t.Errorf("%s: offered at %d, before %d", tt.name, time.Now().Unix(), tt.notBefore)
		}
		var j jobqueue.Job
		for time.Now().Before(deadline) {
			if j, err = s.q.Get(ctx, id); err != nil {
				t.Fatal(err)
			}
			if (j.Status == jobqueue.Held) == tt.held {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if (j.Status == jobqueue.Held) != tt.held {
			t.Errorf("%s: status %s, want held %v", tt.name, j.Status, tt.held)
		} else if tt.held && (j.Ad["HoldReasonCode"] != "20" || j.Ad["HoldReason"] != strconv.Quote(missedDeferralReason)) {
			t.Errorf("%s: hold %s %s, want 20 %q", tt.name, j.Ad["HoldReasonCode"], j.Ad["HoldReason"], missedDeferralReason)
		}
	}
}
