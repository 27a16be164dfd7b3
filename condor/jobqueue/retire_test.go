package jobqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
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
		switch i {
		case 7:
			to, keep = Idle, false // not completed: left as it is
		case 8:
			to, keep = Removed, false // gone to the history: left there as it is
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
	for _, h := range hist {
		if want := map[bool]Status{true: Removed, false: Completed}[h.ID.Proc == 8]; h.Status != want {
			t.Errorf("job %s is %v in the history, want %v", h.ID, h.Status, want)
		}
	}
	if left, err := q.PendingOutbox(ctx); err != nil || len(left) != 0 {
		t.Fatalf("outbox %d records (%v), want none", len(left), err)
	}
}

// TestDeliveredLater drops records without a commit of their own: a
// record given to DeliveredLater stays stored until the next
// RetireDelivered commits, which drops it; maxLaterSeqs records waiting
// are dropped by a transaction of their own.
func TestDeliveredLater(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	const n = maxLaterSeqs + 10
	cluster, err := q.Submit(ctx, ads(n, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]int64, n)
	for i := range n {
		ob := &Outbox{Record: func(JobID, Status, Status) []byte { return []byte("start") }}
		if err := q.Transition(WithOutbox(ctx, ob), JobID{Cluster: cluster, Proc: i}, Running, nil); err != nil {
			t.Fatal(err)
		}
		seqs[i] = ob.Entries[0].Seq
	}
	pending := func() int {
		t.Helper()
		left, err := q.PendingOutbox(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(left)
	}
	for _, seq := range seqs[:3] {
		q.DeliveredLater(seq)
	}
	if got := pending(); got != n {
		t.Fatalf("%d records stored after DeliveredLater, want all %d until a commit", got, n)
	}
	if err := q.RetireDelivered(ctx, nil, []int64{seqs[3]}); err != nil {
		t.Fatal(err)
	}
	if got := pending(); got != n-4 {
		t.Fatalf("%d records stored after RetireDelivered, want %d", got, n-4)
	}
	for _, seq := range seqs[4 : 4+maxLaterSeqs] {
		q.DeliveredLater(seq)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pending() != n-4-maxLaterSeqs {
		if time.Now().After(deadline) {
			t.Fatalf("%d records stored %d after DeliveredLater, want %d", pending(), maxLaterSeqs, n-4-maxLaterSeqs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
