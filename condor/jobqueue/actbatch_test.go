package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestActEachBatches holds, releases and removes clusters of sizes around
// the batch size: every job changes once, no batch is over the size, each
// batch is committed (with its outbox records) before it is reported,
// counts are right after each action, and an empty selection is
// ErrNotFound.
func TestActEachBatches(t *testing.T) {
	const size = 3
	for _, n := range []int{1, 2, 3, 4, 6, 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := context.Background()
			q := openT(t)
			if _, err := q.Submit(ctx, ads(n, "alice")); err != nil {
				t.Fatal(err)
			}
			// Another cluster, which no action here touches.
			if _, err := q.Submit(ctx, ads(2, "bob")); err != nil {
				t.Fatal(err)
			}
			for _, st := range []struct {
				to    Status
				attrs func(Job) Ad
			}{
				{Held, holdAttrs("mass hold", 1, 0)},
				{Idle, releaseAttrs("mass release")},
				{Removed, removeAttrs("mass remove")},
			} {
				ob := &Outbox{Record: func(id JobID, _, _ Status) []byte { return []byte(id.String()) }}
				seen := map[JobID]int{}
				batches := 0
				err := q.actEach(WithOutbox(ctx, ob), ClusterJobs(1), st.to, st.attrs, size, func(batch []Changed) error {
					batches++
					if len(batch) > size {
						t.Errorf("to %s: a batch of %d jobs, want at most %d", st.to, len(batch), size)
					}
					// Committed: the outbox has the batch's records, the
					// queue its change, when the batch is reported.
					if len(ob.Entries) != len(batch) {
						t.Errorf("to %s: %d outbox records for a batch of %d", st.to, len(ob.Entries), len(batch))
					}
					ob.Entries = nil
					for _, c := range batch {
						seen[c.ID]++
						if st.to == Removed {
							continue
						}
						if j, err := q.Get(ctx, c.ID); err != nil || j.Status != st.to {
							t.Errorf("to %s: job %s reported as %v, %v", st.to, c.ID, j.Status, err)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("to %s: %v", st.to, err)
				}
				if want := (n + size - 1) / size; batches != want {
					t.Errorf("to %s: %d batches of %d jobs, want %d", st.to, batches, n, want)
				}
				if len(seen) != n {
					t.Errorf("to %s: %d jobs changed, want %d", st.to, len(seen), n)
				}
				for id, k := range seen {
					if k != 1 {
						t.Errorf("to %s: job %s changed %d times", st.to, id, k)
					}
				}
				counts, err := q.Counts(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want := map[Status]int{Idle: 2}
				if st.to != Removed {
					want[st.to] += n
				}
				for _, s := range []Status{Idle, Held} {
					if counts[s] != want[s] {
						t.Errorf("to %s: %d jobs %s, want %d", st.to, counts[s], s, want[s])
					}
				}
			}
			// The cluster is gone: nothing to act on.
			err := q.actEach(ctx, ClusterJobs(1), Held, holdAttrs("again", 1, 0), size, func([]Changed) error { return nil })
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("hold of a removed cluster: %v, want ErrNotFound", err)
			}
			hist, err := q.History(ctx, HistoryQuery{Sel: ClusterJobs(1)})
			if err != nil || len(hist) != n {
				t.Errorf("history of the removed cluster: %d jobs, %v; want %d", len(hist), err, n)
			}
		})
	}
}
