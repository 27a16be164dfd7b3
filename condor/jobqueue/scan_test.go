package jobqueue

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// scanQueue holds clusters of alice and bob that cross Scan's pages: a
// cluster of 1,201 jobs, a job whose attributes changed after submit (a
// name spelled in another case, a batch name of its own), one held and
// one running.
func scanQueue(t *testing.T) *Queue {
	t.Helper()
	ctx := context.Background()
	q := openT(t)
	for _, c := range []struct {
		owner string
		n     int
	}{{"alice", 3}, {"bob", 1201}, {"alice", 2 * scanPage}, {"bob", 1}} {
		jobs := ads(c.n, c.owner)
		for i := range jobs {
			jobs[i]["JobBatchName"] = `"` + c.owner + `-batch"`
		}
		if _, err := q.Submit(ctx, jobs); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.SetAttrs(ctx, JobID{2, 700}, Ad{"requestmemory": "256", "JobBatchName": `"odd"`}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Hold(ctx, OneJob(JobID{2, 3}), "testing", 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := q.Transition(ctx, JobID{3, 999}, Running, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Remove(ctx, OneJob(JobID{3, 5}), "gone"); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestScanAsQuery: Scan gives what Query gives, job for job, for every
// kind of selection, with and without a projection and a constraint,
// across its pages.
func TestScanAsQuery(t *testing.T) {
	ctx := context.Background()
	q := scanQueue(t)
	notIdle := func(j Job) bool { return j.Status != Idle }
	for _, tc := range []struct {
		name  string
		sel   Selector
		attrs []string
	}{
		{"all", AllJobs(), nil},
		{"all projected", AllJobs(), []string{"ProcId", "requestMemory", "JobBatchName", "NoSuchAttr"}},
		{"no attributes", AllJobs(), []string{}},
		{"owner", OwnerJobs("alice"), nil},
		{"owner projected", OwnerJobs("bob"), []string{"Args"}},
		{"cluster", ClusterJobs(2), []string{"RequestMemory"}},
		{"job", OneJob(JobID{2, 700}), nil},
		{"constraint", Selector{All: true, Constraint: notIdle}, []string{"JobStatus", "HoldReason"}},
		{"owner and constraint", Selector{Owner: "bob", Constraint: notIdle}, nil},
		{"nobody", OwnerJobs("carol"), nil},
		{"states", Selector{All: true, Statuses: []Status{Held, Running}}, []string{"JobStatus"}},
		{"an owner's state", Selector{Owner: "alice", Statuses: []Status{Idle}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := q.Query(ctx, tc.sel, tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			var got []Job
			if err := q.Scan(ctx, tc.sel, tc.attrs, func(j Job) error { got = append(got, j); return nil }); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Scan differs from Query (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("states only", func(t *testing.T) {
		var got []JobID
		sel := Selector{All: true, Statuses: []Status{Held, Running}}
		if err := q.Scan(ctx, sel, []string{}, func(j Job) error { got = append(got, j.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		if want := []JobID{{2, 3}, {3, 999}}; !cmp.Equal(got, want) {
			t.Errorf("held or running: %v, want %v", got, want)
		}
		if err := q.Scan(ctx, Selector{Statuses: []Status{Idle}}, nil, func(Job) error { return nil }); err == nil {
			t.Error("a selector of states alone gave no error")
		}
	})
	t.Run("fn's error ends it", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := q.Scan(ctx, AllJobs(), []string{"ProcId"}, func(Job) error {
			if n++; n == scanPage+2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != scanPage+2 {
			t.Errorf("Scan = %v after %d jobs, want stop after %d", err, n, scanPage+2)
		}
	})
	t.Run("a selection of nothing", func(t *testing.T) {
		if err := q.Scan(ctx, Selector{}, nil, func(Job) error { return nil }); err == nil {
			t.Error("Scan of an empty selector gave no error")
		}
	})
}

// TestClusterCounts: the counts the database keeps as jobs come, change
// and go match those made from every job's ad, also for a queue made
// before it kept them (counted once when opened).
func TestClusterCounts(t *testing.T) {
	ctx := context.Background()
	q := scanQueue(t)
	t.Run("kept", func(t *testing.T) { checkCounts(t, q) })
	if _, err := q.w.ExecContext(ctx, `DELETE FROM meta WHERE key = 'counts'; DELETE FROM job_counts; DELETE FROM batch_overrides;
		INSERT INTO job_counts VALUES (3, 'mallory', 1, 99)`); err != nil {
		t.Fatal(err)
	}
	path := q.Path()
	q.Close()
	q, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	t.Run("counted when opened", func(t *testing.T) { checkCounts(t, q) })
	if _, err := q.ClusterCounts(ctx, Selector{All: true, Constraint: func(Job) bool { return true }}); err == nil {
		t.Error("counting by a constraint gave no error")
	}
}

func checkCounts(t *testing.T, q *Queue) {
	ctx := context.Background()
	all, err := q.Query(ctx, AllJobs(), []string{})
	if err != nil {
		t.Fatal(err)
	}
	byOwner, byStatus := map[string]map[Status]int{}, map[Status]int{}
	for _, j := range all {
		if byOwner[j.Owner] == nil {
			byOwner[j.Owner] = map[Status]int{}
		}
		byOwner[j.Owner][j.Status]++
		byStatus[j.Status]++
	}
	if got, err := q.CountsByOwner(ctx); err != nil || !cmp.Equal(got, byOwner) {
		t.Errorf("CountsByOwner = %v, %v; want %v", got, err, byOwner)
	}
	if got, err := q.Counts(ctx); err != nil || !cmp.Equal(got, byStatus) {
		t.Errorf("Counts = %v, %v; want %v", got, err, byStatus)
	}
	for _, sel := range []Selector{AllJobs(), OwnerJobs("bob"), ClusterJobs(3), OneJob(JobID{2, 700}),
		{All: true, Statuses: []Status{Idle, Held}}, {Owner: "bob", Statuses: []Status{Held}}} {
		jobs, err := q.Query(ctx, sel, nil)
		if err != nil {
			t.Fatal(err)
		}
		type key struct {
			cluster int
			batch   string
			status  Status
		}
		want := map[key]ClusterCount{}
		for _, j := range jobs {
			qdate, _ := strconv.ParseInt(j.Ad["QDate"], 10, 64)
			k := key{j.ID.Cluster, j.Ad["JobBatchName"], j.Status}
			c, ok := want[k]
			if !ok {
				c = ClusterCount{Cluster: k.cluster, Owner: j.Owner, BatchName: k.batch, Status: k.status, FirstProc: j.ID.Proc, QDate: qdate}
			}
			c.Jobs++
			c.LastProc = j.ID.Proc
			want[k] = c
		}
		counts, err := q.ClusterCounts(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		got := map[key]ClusterCount{}
		for _, c := range counts {
			got[key{c.Cluster, c.BatchName, c.Status}] = c
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(key{})); diff != "" {
			t.Errorf("%s: counts differ (-want +got):\n%s", sel, diff)
		}
	}
}
