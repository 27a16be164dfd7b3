package schedd

import (
	"context"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// prefilterQueue is a real job queue of four clusters of three owners
// (one spelled in capitals) with jobs in every queued state, and a
// history.
func prefilterQueue(t testing.TB) *jobqueue.Queue {
	t.Helper()
	ctx := context.Background()
	q, err := jobqueue.Open(ctx, filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	for c, owner := range []string{"alice", "bob", "Alice", "carol"} {
		jobs := make([]jobqueue.Ad, 4+c)
		for i := range jobs {
			jobs[i] = jobqueue.Ad{"Owner": strconv.Quote(owner), "Cmd": `"/bin/true"`, "RequestMemory": strconv.Itoa(100 * (i%3 + 1)),
				"Tag": strconv.Quote("t" + strconv.Itoa(i%2))}
		}
		if _, err := q.Submit(ctx, jobs); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range []struct {
		id jobqueue.JobID
		to []jobqueue.Status
	}{
		{jobqueue.JobID{Cluster: 1, Proc: 0}, []jobqueue.Status{jobqueue.Running}},
		{jobqueue.JobID{Cluster: 1, Proc: 1}, []jobqueue.Status{jobqueue.Held}},
		{jobqueue.JobID{Cluster: 2, Proc: 2}, []jobqueue.Status{jobqueue.Running, jobqueue.Suspended}},
		{jobqueue.JobID{Cluster: 3, Proc: 0}, []jobqueue.Status{jobqueue.Running, jobqueue.TransferringOutput}},
		{jobqueue.JobID{Cluster: 3, Proc: 1}, []jobqueue.Status{jobqueue.Running, jobqueue.Completed}},
		{jobqueue.JobID{Cluster: 4, Proc: 3}, []jobqueue.Status{jobqueue.Removed}},
		{jobqueue.JobID{Cluster: 4, Proc: 4}, []jobqueue.Status{jobqueue.Held, jobqueue.Idle}},
	} {
		for _, to := range ch.to {
			if err := q.Transition(ctx, ch.id, to, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return q
}

// prefilterSame checks that constraint selects the same jobs, from the
// queue and from the history, with its prefilter as without, and returns
// how many ads the constraint was evaluated on with the prefilter, and how
// many without.
func prefilterSame(t testing.TB, q *jobqueue.Queue, constraint string) (with, without int64) {
	t.Helper()
	ctx := context.Background()
	sels, err := selectors(nil, constraint)
	if err != nil {
		return 0, 0
	}
	sel := sels[0]
	var calls atomic.Int64
	inner := sel.Constraint
	sel.Constraint = func(j jobqueue.Job) bool { calls.Add(1); return inner(j) }
	full := sel
	full.Filter = jobqueue.Filter{}
	ids := func(jobs []jobqueue.Job) []string {
		out := []string{}
		for _, j := range jobs {
			out = append(out, j.ID.String())
		}
		return out
	}
	got, err := q.Query(ctx, sel, nil)
	if err != nil {
		t.Fatalf("%s: %v", constraint, err)
	}
	with = calls.Swap(0)
	want, err := q.Query(ctx, full, nil)
	if err != nil {
		t.Fatalf("%s: %v", constraint, err)
	}
	without = calls.Swap(0)
	if !reflect.DeepEqual(ids(got), ids(want)) {
		t.Errorf("constraint %s, prefilter %s: got %v, want %v", constraint, sel.Filter, ids(got), ids(want))
	}
	var scanned []string
	if err := q.Scan(ctx, sel, []string{"ClusterId"}, func(j jobqueue.Job) error {
		scanned = append(scanned, j.ID.String())
		return nil
	}); err != nil {
		t.Fatalf("%s: %v", constraint, err)
	}
	if !reflect.DeepEqual(append([]string{}, scanned...), ids(want)) {
		t.Errorf("constraint %s, prefilter %s: scan got %v, want %v", constraint, sel.Filter, scanned, ids(want))
	}
	hgot, err := q.History(ctx, jobqueue.HistoryQuery{Sel: sel})
	if err != nil {
		t.Fatalf("%s: %v", constraint, err)
	}
	hwant, err := q.History(ctx, jobqueue.HistoryQuery{Sel: full})
	if err != nil {
		t.Fatalf("%s: %v", constraint, err)
	}
	if !reflect.DeepEqual(ids(hgot), ids(hwant)) {
		t.Errorf("constraint %s, prefilter %s: history got %v, want %v", constraint, sel.Filter, ids(hgot), ids(hwant))
	}
	// A constraint found exact selects the same jobs by its condition
	// alone, no ad read.
	calls.Store(0)
	exact := []jobqueue.Selector{sel}
	if exactSelectors(exact, constraint); exact[0].Exact {
		got, err := q.Query(ctx, exact[0], nil)
		if err != nil {
			t.Fatalf("%s: %v", constraint, err)
		}
		if !reflect.DeepEqual(ids(got), ids(want)) {
			t.Errorf("exact constraint %s, condition %s: got %v, want %v", constraint, exact[0].Filter, ids(got), ids(want))
		}
		var scanned []string
		if err := q.Scan(ctx, exact[0], []string{}, func(j jobqueue.Job) error {
			scanned = append(scanned, j.ID.String())
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", constraint, err)
		}
		if !reflect.DeepEqual(append([]string{}, scanned...), ids(want)) {
			t.Errorf("exact constraint %s, condition %s: scan got %v, want %v", constraint, exact[0].Filter, scanned, ids(want))
		}
		hgot, err := q.History(ctx, jobqueue.HistoryQuery{Sel: exact[0]})
		if err != nil {
			t.Fatalf("%s: %v", constraint, err)
		}
		if !reflect.DeepEqual(ids(hgot), ids(hwant)) {
			t.Errorf("exact constraint %s, condition %s: history got %v, want %v", constraint, exact[0].Filter, ids(hgot), ids(hwant))
		}
		if calls.Load() != 0 {
			t.Errorf("exact constraint %s: evaluated on %d ads, want none", constraint, calls.Load())
		}
	}
	return with, without
}

// TestExactPrefilter checks which constraints are answered by the queue's
// indexes alone (prefilterSame checks, on a real queue, that those select
// the same jobs as the constraint evaluated on every ad).
func TestExactPrefilter(t *testing.T) {
	q := prefilterQueue(t)
	for _, tc := range []struct {
		constraint string
		exact      bool
	}{
		{"ClusterId == 2", true},
		{"MY.ClusterId == 2 && (ProcId == 3)", true},
		{"2 == ClusterId && 3 == ProcId", true},
		{"ClusterId is 2 && ProcId isnt 3", true},
		{`Owner == "alice"`, true},
		{`Owner =?= "alice"`, true},
		{`Owner is "Alice" || JobStatus == 5`, true},
		{"JobStatus == 5 || JobStatus == 7", true},
		{"JobStatus != 1", true},
		{"ClusterId >= 3 && ClusterId < 4", true},
		{"ProcId <= 1 && ClusterId == 4", true},
		{`Owner == "ALICE" && Tag == "t1"`, false},
		{"ClusterId == 2 || RequestMemory > 100", false},
		{"!(ClusterId == 2)", false},
		{"ClusterId == 2.0", false},
		{`ClusterId == "2"`, false},
		{"TARGET.ClusterId == 2", false},
		{"ClusterId + 0 == 2", false},
		{`Owner != "alice"`, false},
		{`Owner == undefined`, false},
		{"JobStatus == true", false},
		{"ClusterId == 2 ? true : false", false},
		{"ClusterId > -1 && ClusterId != 3", true},
		{"RequestMemory == 100", false},
	} {
		t.Run(tc.constraint, func(t *testing.T) {
			sels, err := selectors(nil, tc.constraint)
			if err != nil {
				t.Fatal(err)
			}
			if exactSelectors(sels, tc.constraint); sels[0].Exact != tc.exact {
				t.Errorf("exact %v, want %v", sels[0].Exact, tc.exact)
			}
			if tc.exact && sels[0].Constraint != nil {
				t.Error("an exact constraint is still evaluated")
			}
			prefilterSame(t, q, tc.constraint)
		})
	}
}

// TestPrefilter checks, on a real queue, that a constraint pinning the
// indexed attributes is evaluated only on the jobs it may select, and
// that every constraint selects the same jobs with its prefilter as
// without.
func TestPrefilter(t *testing.T) {
	q := prefilterQueue(t)
	const total = 4 + 5 + 6 + 7 - 2 // two went to the history
	for _, tc := range []struct {
		constraint string
		evaluated  int64 // ads the constraint is evaluated on
	}{
		{"ClusterId == 2", 5},
		{"ClusterId == 2 && ProcId == 3", 1},
		{"MY.ClusterId == 2 && (ProcId == 3)", 1},
		{"2 == ClusterId && 3 == ProcId", 1},
		{"ClusterId is 2 && ProcId isnt 3", 4},
		{`Owner == "alice"`, 4 + 6 - 1}, // case does not matter to ==
		{`Owner =?= "alice"`, 4},        // nor to =?=
		{`Owner == "ALICE" && Tag == "t1"`, 9},
		{"JobStatus == 2", 1},
		{"JobStatus == 5 || JobStatus == 7", 2},
		{"JobStatus == 1 || ClusterId == 3", total - 4 + 1}, // 3.0 is not idle
		{"JobStatus != 1", 6 - 2},
		{"ClusterId >= 3 && ClusterId < 4", 6 - 1},
		{"ClusterId > 3", 7 - 1},
		{"3 < ClusterId", 7 - 1},
		{"ProcId <= 1 && ClusterId == 4", 2},
		{"(ClusterId == 1 || ClusterId == 4) && RequestMemory > 100", 4 + 7 - 1},
		// Not understood: every job is asked.
		{"ClusterId == 2 || RequestMemory > 100", total},
		{"!(ClusterId == 2)", total},
		{"ClusterId == 2.0", total},
		{`ClusterId == "2"`, total},
		{"TARGET.ClusterId == 2", total},
		{"ClusterId + 0 == 2", total},
		{`Owner != "alice"`, total},
		{`Owner == undefined`, total},
		{"JobStatus == true", total},
		{"ClusterId == 2 ? true : false", total},
		{"[ClusterId = 2].ClusterId == 2", total},
		{"RequestMemory == 100", total},
	} {
		t.Run(tc.constraint, func(t *testing.T) {
			with, without := prefilterSame(t, q, tc.constraint)
			if without != total {
				t.Fatalf("without the prefilter the constraint saw %d ads, want %d", without, total)
			}
			if with != tc.evaluated {
				t.Errorf("the constraint saw %d ads, want %d", with, tc.evaluated)
			}
		})
	}
}

// FuzzPrefilter checks that whatever the constraint, its prefilter
// changes nothing of what a query or the history selects.
func FuzzPrefilter(f *testing.F) {
	for _, s := range []string{
		"ClusterId == 2", `Owner == "alice" || JobStatus == 5`, "ClusterId == 1 && ProcId > 1 || JobStatus isnt 1",
		`(Owner is "Alice") && ClusterId >= 3`, "JobStatus < 3 && !(ProcId == 0)", `MY.Owner == "BOB" || Tag == "t1"`,
		"ProcId != 2 && ClusterId <= 2 && RequestMemory >= 200", "ClusterId == 4 || ClusterId == 2 || ProcId == 0",
	} {
		f.Add(s)
	}
	q := prefilterQueue(f)
	f.Fuzz(func(t *testing.T, constraint string) {
		if _, err := classad.ParseExpr(constraint); err != nil {
			return
		}
		prefilterSame(t, q, constraint)
	})
}

// TestConstraintAdEvaluatesAsWholeAd evaluates constraints on the ad
// constraintAd builds (the attributes the constraint reads, in turn) and
// on the whole job ad: each must give the same value, whatever the
// constraint reads indirectly, by another case, or by name at run time.
func TestConstraintAdEvaluatesAsWholeAd(t *testing.T) {
	job := wire.Ad{
		"ClusterId": "7", "ProcId": "3", "Owner": `"alice"`, "JobStatus": "1",
		"RequestCpus": "2", "RequestMemory": "RequestCpus * 1024", "Big": "RequestMemory > 1500",
		"Name": `"MyJob"`, "Which": `"Owner"`, "Tags": `{ "a", "b" }`, "Nested": `[ x = 5; y = x + 1 ]`,
		"Loop": "Loop + 1", "Bad": "Bad2", "Bad2": "Unknown * 2",
	}
	tests := []string{
		"RequestCpus == 2",
		"requestcpus == 2",
		"Big",
		"big && OWNER == \"alice\"",
		"RequestMemory == 2048",
		"Missing =?= undefined",
		"Bad isnt undefined",
		"Loop > 0",
		"member(\"a\", Tags)",
		"Nested.y == 6", // Nested is a record: the whole ad
		"eval(Which) == \"alice\"",
		"eval(strcat(\"Request\", \"Cpus\")) == 2",
		"unparse(RequestMemory) == \"RequestCpus * 1024\"",
		"MY.Big && ClusterId == 7",
		"ifThenElse(ProcId > 2, Big, false)",
		"[ z = RequestCpus ].z == 2",
		"size(Name) == 5",
	}
	whole, err := wire.ToClassAd(job)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range tests {
		t.Run(src, func(t *testing.T) {
			e, err := classad.ParseExpr(src)
			if err != nil {
				t.Fatal(err)
			}
			refs, _ := classad.References(e)
			part, err := constraintAd(job, refs, mayLookUpByName(src))
			if err != nil {
				t.Fatal(err)
			}
			p := classad.CompileExpr(e)
			want, got := p.Eval(whole, nil), p.Eval(part, nil)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("on the attributes it reads %v (%s), on the whole ad %v", got, part, want)
			}
			if !mayLookUpByName(src) && !strings.Contains(src, "Nested") && part.Len() >= whole.Len() {
				t.Errorf("the ad of %q has all %d attributes", src, part.Len())
			}
		})
	}
}
