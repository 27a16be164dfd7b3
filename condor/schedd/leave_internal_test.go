package schedd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestLeaveInQueueExpr: LeaveJobInQueue is evaluated as the job stands
// completed, its exit attributes, JobStatus and CompletionDate set.
func TestLeaveInQueueExpr(t *testing.T) {
	t.Parallel()
	done := time.Unix(1_000_000, 0)
	tests := []struct {
		name  string
		ad    string
		attrs jobqueue.Ad
		want  bool
	}{
		{"unset", `[Cmd = "x"]`, nil, false},
		{"false", `[LeaveJobInQueue = false]`, nil, false},
		{"true", `[LeaveJobInQueue = true]`, nil, true},
		{"on its status", `[LeaveJobInQueue = JobStatus == 4]`, nil, true},
		{"on the exit code", `[LeaveJobInQueue = ExitCode != 0]`, jobqueue.Ad{"ExitCode": "1"}, true},
		{"exit code zero", `[LeaveJobInQueue = ExitCode != 0]`, jobqueue.Ad{"ExitCode": "0"}, false},
		{"completion date defaults to now", `[LeaveJobInQueue = CompletionDate == 1000000]`, nil, true},
		{"completion date of the ad", `[LeaveJobInQueue = CompletionDate == 5; CompletionDate = 5]`, nil, true},
		{"undefined", `[LeaveJobInQueue = Nope]`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ad, err := classad.ParseNewAd(tt.ad)
			if err != nil {
				t.Fatal(err)
			}
			if got := leaveInQueue(ad, tt.attrs, done); got != tt.want {
				t.Errorf("leaveInQueue = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLeaveInQueue: a job whose LeaveJobInQueue is true stays in the queue
// completed; it goes to the history once the expression turns false, or
// when removed; one without goes to the history at once.
func TestLeaveInQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestSchedd(t)
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1"}
	kept, keptToo, plain := wire.Ad{}, wire.Ad{}, wire.Ad{}
	for k, v := range base {
		kept[k], keptToo[k], plain[k] = v, v, v
	}
	kept["LeaveJobInQueue"] = "ExitCode == 0"
	keptToo["LeaveJobInQueue"] = "true"
	plain["LeaveJobInQueue"] = "false"
	if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{kept, keptToo, plain}}); err != nil {
		t.Fatal(err)
	}
	inQueue := func(proc int) (jobqueue.Status, bool) {
		j, err := s.q.Get(ctx, jobqueue.JobID{Cluster: nc.Cluster, Proc: proc})
		if errors.Is(err, jobqueue.ErrNotFound) {
			return 0, false
		} else if err != nil {
			t.Fatal(err)
		}
		return j.Status, true
	}
	for proc := range 3 {
		id := jobqueue.JobID{Cluster: nc.Cluster, Proc: proc}
		if err := s.q.Transition(ctx, id, jobqueue.Running, nil); err != nil {
			t.Fatal(err)
		}
		j, err := s.q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ad, err := wire.ToClassAd(j.Ad)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.complete(ctx, id, ad, jobqueue.Ad{"ExitCode": "0"}, joblog.Event{Type: joblog.Terminated}); err != nil {
			t.Fatal(err)
		}
	}
	waitEnded(t, s)
	s.retireCompleted(ctx)
	for proc, want := range []bool{true, true, false} {
		st, ok := inQueue(proc)
		if ok != want || ok && st != jobqueue.Completed {
			t.Errorf("job %d.%d: in the queue %v (%s), want %v, completed", nc.Cluster, proc, ok, st, want)
		}
	}
	// condor_qedit LeaveJobInQueue = false: it leaves at the next pass.
	if err := s.q.SetAttrs(ctx, jobqueue.JobID{Cluster: nc.Cluster, Proc: 0}, jobqueue.Ad{"LeaveJobInQueue": "false"}); err != nil {
		t.Fatal(err)
	}
	s.retireCompleted(ctx)
	if _, ok := inQueue(0); ok {
		t.Errorf("job %d.0 still in the queue after its LeaveJobInQueue turned false", nc.Cluster)
	}
	// condor_rm: the other leaves too.
	if _, err := s.q.Remove(ctx, jobqueue.OneJob(jobqueue.JobID{Cluster: nc.Cluster, Proc: 1}), "via condor_rm"); err != nil {
		t.Fatal(err)
	}
	if _, ok := inQueue(1); ok {
		t.Errorf("job %d.1 still in the queue after condor_rm", nc.Cluster)
	}
	hist, err := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.ClusterJobs(nc.Cluster), Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]jobqueue.Status{}
	for _, j := range hist {
		got[j.ID.Proc] = j.Status
	}
	want := map[int]jobqueue.Status{0: jobqueue.Completed, 1: jobqueue.Removed, 2: jobqueue.Completed}
	for p, st := range want {
		if got[p] != st {
			t.Errorf("history: job %d.%d %s, want %s", nc.Cluster, p, got[p], st)
		}
	}
}

// waitEnded waits for the moves to the history that complete left to the
// background to be made.
func waitEnded(t *testing.T, s *Schedd) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.ending)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d completed jobs still being moved to the history after 30 s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
