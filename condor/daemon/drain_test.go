package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// countJobs returns how many of cm's queued jobs have status st.
func countJobs(t *testing.T, cm *testpool.Node, st jobqueue.Status) int {
	t.Helper()
	jobs, err := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{
		Constraint: fmt.Sprintf("JobStatus == %d", int(st))})
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

// TestDrain drains a startd that runs two jobs, as a pond member does when
// it is released: waiting lets them finish, evicting (or waiting past the
// drain's time) hands them back to the schedd, which runs them again once
// the startd resumes; while drained, no job starts and the slot is
// advertised as Drained.
func TestDrain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sleep    string // each job's run time
		evict    bool
		timeout  time.Duration
		finished int
		evicted  int
	}{
		{name: "wait lets jobs finish", sleep: "2", timeout: time.Minute, finished: 2},
		{name: "evict", sleep: "600", evict: true, timeout: time.Minute, evicted: 2},
		{name: "wait past its time evicts", sleep: "600", timeout: time.Second, evicted: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm, execs := pool(t, 1, nil)
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			submitFile(t, cm, dir, "executable = /bin/sleep\narguments = "+tt.sleep+
				"\ntransfer_executable = false\nrequest_cpus = 1\nrequest_memory = 16\nlog = job.log\nqueue 2\n")
			sd := execs[0].Master.Startd()
			if sd == nil {
				t.Fatal("no startd")
			}
			// Running on the startd, not only in the queue (the schedd
			// marks a job running before it activates the claim).
			testpool.Eventually(t, 30*time.Second, "both jobs to run on the startd", func() bool {
				busy := 0
				for _, ad := range sd.Slots() {
					if a, _ := ad.EvalAttr("Activity").StringValue(); a == "Busy" {
						busy++
					}
				}
				return busy == 2
			})
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			res := sd.Drain(ctx, tt.evict)
			cancel()
			if res.Finished != tt.finished || res.Evicted != tt.evicted {
				t.Fatalf("drain = %+v, want %d finished, %d evicted", res, tt.finished, tt.evicted)
			}
			if tt.timeout < time.Minute && res.Took < tt.timeout {
				t.Errorf("drain took %s, before its time of %s was up", res.Took, tt.timeout)
			}
			// A slot whose evicted job's report is still on its way to
			// the schedd (a drain past its time does not wait for it) is
			// released once the report is delivered.
			testpool.Eventually(t, 10*time.Second, "every slot to be Drained", func() bool {
				for _, ad := range sd.Slots() {
					if st, _ := ad.EvalAttr("State").StringValue(); st != "Drained" {
						return false
					}
				}
				return true
			})
			for _, ad := range sd.Slots() {
				if st, _ := ad.EvalAttr("State").StringValue(); st != "Drained" {
					t.Errorf("slot %s is %q while drained, want Drained", ad.String(), st)
				}
				if d, _ := ad.EvalAttr("Draining").BoolValue(); !d {
					t.Errorf("slot does not say Draining: %s", ad.String())
				}
			}
			wantIdle := tt.evicted
			testpool.Eventually(t, 30*time.Second, fmt.Sprintf("%d evicted job(s) back in the queue as idle", wantIdle), func() bool {
				return countJobs(t, cm, jobqueue.Idle) == wantIdle && countJobs(t, cm, jobqueue.Running) == 0
			})
			if tt.evicted > 0 {
				b, _ := os.ReadFile(filepath.Join(dir, "job.log"))
				if n := strings.Count(string(b), "Job was evicted."); n != tt.evicted {
					t.Errorf("job log has %d eviction events, want %d:\n%s", n, tt.evicted, b)
				}
			}
			// Drained, the startd takes no job: one submitted now stays
			// idle through several negotiation cycles.
			submitFile(t, cm, dir, "executable = /bin/true\ntransfer_executable = false\nrequest_memory = 16\nqueue\n")
			time.Sleep(5 * time.Second)
			if n := countJobs(t, cm, jobqueue.Running); n != 0 {
				t.Fatalf("%d job(s) started on a drained startd", n)
			}
			sd.Resume()
			testpool.Eventually(t, 30*time.Second, "jobs to run after the drain ended", func() bool {
				return countJobs(t, cm, jobqueue.Idle) == 0
			})
		})
	}
}
