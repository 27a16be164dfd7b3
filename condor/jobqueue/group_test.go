package jobqueue

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// openCounting opens a queue that counts its commits.
func openCounting(t *testing.T) (*Queue, *atomic.Int64) {
	t.Helper()
	var commits atomic.Int64
	q, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "queue.db"), Options{OnCommit: func(time.Duration) { commits.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q, &commits
}

// holdWriter takes the writer until the returned function is called.
func holdWriter(t *testing.T, q *Queue) (release func()) {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = q.tx(context.Background(), func(*sql.Tx) error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	var once sync.Once
	return func() { once.Do(func() { close(hold) }) }
}

// waitUnits waits until n units wait for the commit group's next round.
func waitUnits(t *testing.T, q *Queue, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q.group.mu.Lock()
		got := 0
		for _, u := range q.group.units {
			if !u.taken {
				got++
			}
		}
		q.group.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d units waiting, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitLeader waits until a round took every unit and runs.
func waitLeader(t *testing.T, q *Queue) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q.group.mu.Lock()
		running := q.group.running && len(q.group.units) == 0
		q.group.mu.Unlock()
		if running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no round took the units")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupedChangesFailAlone applies changes from many goroutines while
// the writer is busy: they are made together in one commit, a change that
// fails (a transition the job cannot make, one to a job not in the queue)
// is rolled back alone with its outbox record, and every other change,
// its record included, is made.
func TestGroupedChangesFailAlone(t *testing.T) {
	ctx := context.Background()
	q, commits := openCounting(t)
	const n = 12
	cluster, err := q.Submit(ctx, ads(n, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	// The first round's leader waits for the writer; the others join the
	// round after it.
	release := holdWriter(t, q)
	type outcome struct {
		err error
		ob  *Outbox
	}
	out := make([]outcome, n+1)
	bad := map[int]bool{3: true, 8: true, n: true}
	var wg sync.WaitGroup
	apply := func(i int) {
		ob := &Outbox{Record: func(JobID, Status, Status) []byte { return []byte("start") }}
		to := Running
		if bad[i] && i != n {
			to = Completed // Idle cannot go to Completed
		}
		wg.Go(func() {
			err := q.Apply(WithOutbox(ctx, ob), []Change{{ID: JobID{Cluster: cluster, Proc: i}, To: to}})
			out[i] = outcome{err, ob}
		})
	}
	apply(0)
	waitLeader(t, q)
	for i := 1; i <= n; i++ {
		apply(i)
	}
	waitUnits(t, q, n)
	before := commits.Load()
	release()
	wg.Wait()
	if got := commits.Load() - before; got != 3 {
		// The holder's, the leader's round, the round of the n others.
		t.Errorf("%d commits, want 3", got)
	}
	for i, o := range out {
		id := JobID{Cluster: cluster, Proc: i}
		if bad[i] {
			var te *TransitionError
			if i == n && !errors.Is(o.err, ErrNotFound) || i != n && !errors.As(o.err, &te) {
				t.Errorf("job %s: %v, want its own error", id, o.err)
			}
			if len(o.ob.Entries) != 0 {
				t.Errorf("job %s: failed change published %d outbox records", id, len(o.ob.Entries))
			}
			if i != n {
				if j, err := q.Get(ctx, id); err != nil || j.Status != Idle {
					t.Errorf("job %s after its failed change: %v, %v; want Idle", id, j.Status, err)
				}
			}
			continue
		}
		if o.err != nil {
			t.Errorf("job %s: %v", id, o.err)
			continue
		}
		if j, err := q.Get(ctx, id); err != nil || j.Status != Running {
			t.Errorf("job %s: %v, %v; want Running", id, j.Status, err)
		}
		if len(o.ob.Entries) != 1 {
			t.Errorf("job %s: %d outbox records published, want 1", id, len(o.ob.Entries))
		}
	}
	stored, err := q.PendingOutbox(ctx)
	if err != nil || len(stored) != n-2 {
		t.Errorf("%d outbox records stored (%v), want %d", len(stored), err, n-2)
	}
}

// TestGroupedCallerGivesUp checks the two ends of a caller whose context
// ends: before its round took its unit, the unit is withdrawn and none of
// it is made; once taken, the unit is made whole and the caller told so.
func TestGroupedCallerGivesUp(t *testing.T) {
	ctx := context.Background()
	q, _ := openCounting(t)
	cluster, err := q.Submit(ctx, ads(2, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	first, second := JobID{Cluster: cluster, Proc: 0}, JobID{Cluster: cluster, Proc: 1}

	t.Run("before its round", func(t *testing.T) {
		release := holdWriter(t, q)
		defer release()
		// A leader takes the first round and waits for the writer.
		lead := make(chan error, 1)
		go func() { lead <- q.grouped(ctx, func(context.Context, *sql.Tx) error { return nil }) }()
		waitLeader(t, q)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- q.Transition(cctx, first, Running, nil) }()
		waitUnits(t, q, 1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("withdrawn change: %v, want context.Canceled", err)
		}
		release()
		if err := <-lead; err != nil {
			t.Fatal(err)
		}
		if j, err := q.Get(ctx, first); err != nil || j.Status != Idle {
			t.Fatalf("job after its withdrawn change: %v, %v; want Idle", j.Status, err)
		}
	})

	t.Run("once taken", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		running := make(chan struct{})
		err := q.grouped(cctx, func(ctx context.Context, tx *sql.Tx) error {
			close(running)
			cancel()
			// The statements run though the caller's context ended.
			_, err := q.change(ctx, tx, Change{ID: second, To: Running})
			return err
		})
		<-running
		if err != nil {
			t.Fatalf("a change taken then given up: %v, want it made", err)
		}
		if j, err := q.Get(ctx, second); err != nil || j.Status != Running {
			t.Fatalf("job: %v, %v; want Running", j.Status, err)
		}
	})
}
