package schedd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/wire"
)

// TestHistoryPruned runs a schedd whose history keeps at most
// MAX_HISTORY_LOG x (1 + MAX_HISTORY_ROTATIONS) bytes of ads, and removes
// 10,000 jobs (2,000 under the race detector): the history keeps the most recently finished that fit,
// and none is pruned with ENABLE_HISTORY_ROTATION false.
func TestHistoryPruned(t *testing.T) {
	if testing.Short() {
		t.Skip("removes thousands of jobs and waits for the history's pruning")
	}
	// Under the race detector, 10,000 jobs take minutes to submit and
	// remove: it checks 2,000, still five times what the bound keeps, and
	// make allocs checks the 10,000 without it.
	jobs := 10000
	if schedd.RaceDetector {
		jobs = 2000
	}
	tests := []struct {
		name  string
		knobs string
		max   int // at most this many in the history (0: every job)
	}{
		{"bounded", "MAX_HISTORY_LOG = 100000\nMAX_HISTORY_ROTATIONS = 1\n", 200000 / 500},
		{"not rotated", "MAX_HISTORY_LOG = 100000\nENABLE_HISTORY_ROTATION = false\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := startWith(t, tt.knobs)
			n.runSchedd()
			n.submitFile("alice", fmt.Sprintf("executable = /bin/true\nrequirements = false\nqueue %d\n", jobs))
			ctx := context.Background()
			if _, err := n.c.Act(ctx, &wire.ActRequest{Action: wire.ActRemove, Args: []string{"1"}}); err != nil {
				t.Fatal(err)
			}
			count := func() []wire.Job {
				h, err := n.c.History(ctx, &wire.QueryJobsRequest{Projection: []string{"ClusterId", "ProcId"}})
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			deadline := time.Now().Add(40 * time.Second)
			h := count()
			for tt.max > 0 && len(h) > tt.max && time.Now().Before(deadline) {
				time.Sleep(500 * time.Millisecond)
				h = count()
			}
			if tt.max == 0 {
				time.Sleep(12 * time.Second) // a check of the loop
				if h = count(); len(h) != jobs {
					t.Fatalf("%d jobs in the history, want all %d", len(h), jobs)
				}
				return
			}
			if len(h) > tt.max || len(h) == 0 {
				t.Fatalf("%d jobs in the history, want 1 to %d", len(h), tt.max)
			}
			// The most recently removed are kept.
			if got := h[0].Ad["ProcId"]; got != fmt.Sprint(jobs-1) {
				t.Errorf("the newest job in the history is proc %s, want %d", got, jobs-1)
			}
			t.Logf("%d of %d jobs kept", len(h), jobs)
		})
	}
}
