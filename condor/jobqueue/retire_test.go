package jobqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestRetireDeliveredTogether ends jobs from many goroutines at once:
// each call of RetireDelivered returns once its own jobs are in the
// history and its outbox records are gone, whichever transaction made
// them; a job removed meanwhile, or kept in another state, is left as it
// is.
func TestRetireDeliveredTogether(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	const n = 200
	cluster, err := q.Submit(ctx, ads(n, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]int64, n)
	for i := range n {
		id := JobID{Cluster: cluster, Proc: i}
		if err := q.Transition(ctx, id, Running, nil); err != nil {
			t.Fatal(err)
		}
		ob := &Outbox{Record: func(JobID, Status, Status) []byte { return []byte("end") }}
		to, keep := Completed, true
		if i == 7 {
			to, keep = Idle, false // not completed: left as it is
		}
		if err := q.Apply(WithOutbox(ctx, ob), []Change{{ID: id, To: to, Keep: keep}}); err != nil {
			t.Fatal(err)
		}
		seqs[i] = ob.Entries[0].Seq
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := JobID{Cluster: cluster, Proc: i}
			if err := q.RetireDelivered(ctx, []JobID{id}, []int64{seqs[i]}); err != nil {
				errs <- err
				return
			}
			// Its own end is made when it returns.
			if _, err := q.Get(ctx, id); i != 7 && !errors.Is(err, ErrNotFound) {
				errs <- errors.New("job " + id.String() + " still in the queue after RetireDelivered returned")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	hist, err := q.History(ctx, HistoryQuery{Sel: ClusterJobs(cluster), Limit: n + 1})
	if err != nil || len(hist) != n-1 {
		t.Fatalf("%d jobs in the history, want %d: %v", len(hist), n-1, err)
	}
	if j, err := q.Get(ctx, JobID{Cluster: cluster, Proc: 7}); err != nil || j.Status != Idle {
		t.Fatalf("the idle job: %v, %v", j.Status, err)
	}
	if left, err := q.PendingOutbox(ctx); err != nil || len(left) != 0 {
		t.Fatalf("outbox %d records (%v), want none", len(left), err)
	}
}
