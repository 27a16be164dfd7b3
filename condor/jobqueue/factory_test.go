package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
)

func TestFactoryRoom(t *testing.T) {
	tests := []struct {
		name                string
		f                   Factory
		present, idle, room int
		want                int
	}{
		{"limit", Factory{Total: 100, Next: 10, Limit: 50}, 45, 45, 1000, 5},
		{"limit full", Factory{Total: 100, Next: 10, Limit: 50}, 50, 0, 1000, 0},
		{"max idle", Factory{Total: 100, Next: 10, MaxIdle: 20}, 90, 15, 1000, 5},
		{"both", Factory{Total: 100, Next: 10, Limit: 30, MaxIdle: 20}, 25, 0, 1000, 5},
		{"end", Factory{Total: 100, Next: 98, Limit: 50}, 0, 0, 1000, 2},
		{"queue room", Factory{Total: 100, Limit: 50}, 0, 0, 7, 7},
		{"no limits", Factory{Total: 100, Next: 40}, 0, 0, 1000, 60},
		{"held", Factory{Total: 100, Limit: 50, Paused: FactoryHeld}, 0, 0, 1000, 0},
		{"over", Factory{Total: 100, Limit: 5}, 9, 0, 1000, 0},
	}
	for _, tt := range tests {
		if got := FactoryRoom(tt.f, tt.present, tt.idle, tt.room); got != tt.want {
			t.Errorf("%s: FactoryRoom = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestMaterialize drives a factory of 20 procs with a limit of 4 through
// the queue: at no time more than 4 are in the queue, every ProcId is
// made once, in order, and the cluster ad says where the factory is.
func TestMaterialize(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	cluster, err := q.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	built := map[int]int{}
	build := func(proc int) (Ad, error) {
		built[proc]++
		return Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "Args": strconv.Quote(fmt.Sprint(proc)), "JobUniverse": "5"}, nil
	}
	f := Factory{Cluster: cluster, Owner: "alice", Digest: []byte("{}"), Total: 20, Limit: 4}
	retry, made, err := q.SubmitFactory(ctx, f, "s1", 1000, build)
	if err != nil || retry || len(made) != 4 {
		t.Fatalf("SubmitFactory: retry %v, made %v, %v", retry, made, err)
	}
	if retry, made, err := q.SubmitFactory(ctx, f, "s1", 1000, build); err != nil || !retry || len(made) != 0 {
		t.Fatalf("retry of SubmitFactory: retry %v, made %v, %v", retry, made, err)
	}
	next := 4
	for next < 20 {
		// Nothing more while the cluster is full.
		if m, err := q.Materialize(ctx, cluster, 1000, build); err != nil || len(m) != 0 {
			t.Fatalf("Materialize of a full cluster: %v, %v", m, err)
		}
		jobs, err := q.Query(ctx, ClusterJobs(cluster), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) > 4 {
			t.Fatalf("%d jobs in the queue, limit 4", len(jobs))
		}
		// Two of them complete.
		for _, j := range jobs[:2] {
			if err := q.Transition(ctx, j.ID, Running, nil); err != nil {
				t.Fatal(err)
			}
			if err := q.Transition(ctx, j.ID, Completed, nil); err != nil {
				t.Fatal(err)
			}
		}
		m, err := q.Materialize(ctx, cluster, 1000, build)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range m {
			if id.Proc != next {
				t.Fatalf("made %v, want proc %d", id, next)
			}
			next++
		}
		if next < 20 {
			j, err := q.Get(ctx, JobID{cluster, next - 1})
			if err != nil {
				t.Fatal(err)
			}
			if j.Ad[AttrMaterializeNext] != strconv.Itoa(next) || j.Ad[AttrTotalSubmitProcs] != "20" || j.Ad["Args"] != strconv.Quote(fmt.Sprint(next-1)) {
				t.Fatalf("job %d.%d: next %s, total %s, args %s", cluster, next-1, j.Ad[AttrMaterializeNext], j.Ad[AttrTotalSubmitProcs], j.Ad["Args"])
			}
		}
	}
	for p := range 20 {
		if built[p] != 1 {
			t.Errorf("proc %d built %d times", p, built[p])
		}
	}
	if fs, err := q.Factories(ctx); err != nil || len(fs) != 0 {
		t.Errorf("factory left after its last proc: %v, %v", fs, err)
	}
	if _, err := q.Materialize(ctx, cluster, 1000, build); !errors.Is(err, ErrFactoryDone) {
		t.Errorf("Materialize after the last proc: %v, want ErrFactoryDone", err)
	}
}

// TestMaterializeFailureMakesNothing checks that a proc that cannot be
// built makes none of its batch and leaves the counter where it was.
func TestMaterializeFailureMakesNothing(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	cluster, _ := q.NewCluster(ctx)
	build := func(proc int) (Ad, error) {
		if proc == 3 {
			return nil, errors.New("bad proc")
		}
		return Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`}, nil
	}
	_, made, err := q.SubmitFactory(ctx, Factory{Cluster: cluster, Owner: "alice", Digest: []byte("{}"), Total: 10, MaxIdle: 3}, "", 1000, build)
	if err != nil || len(made) != 3 {
		t.Fatalf("SubmitFactory: %v, %v", made, err)
	}
	if err := q.Transition(ctx, JobID{cluster, 0}, Running, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Materialize(ctx, cluster, 1000, build); err == nil {
		t.Fatal("Materialize of a bad proc: no error")
	}
	fs, err := q.Factories(ctx)
	if err != nil || len(fs) != 1 || fs[0].Next != 3 {
		t.Fatalf("factory after a failed materialization: %+v, %v", fs, err)
	}
	if ok, err := q.RemoveFactory(ctx, cluster); !ok || err != nil {
		t.Fatalf("RemoveFactory: %v, %v", ok, err)
	}
	if _, err := q.Materialize(ctx, cluster, 1000, build); !errors.Is(err, ErrFactoryDone) {
		t.Errorf("Materialize after RemoveFactory: %v", err)
	}
}

// TestMaterializeAttrsOfLaterProcs checks that a proc made after the
// cluster ad was stored neither inherits an attribute of the cluster ad
// it does not have nor loses one it has that differs.
func TestMaterializeAttrsOfLaterProcs(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	cluster, _ := q.NewCluster(ctx)
	build := func(proc int) (Ad, error) {
		a := Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "Args": strconv.Quote(fmt.Sprint(proc))}
		if proc == 0 {
			// Proc 0 alone stores the cluster ad, and stays in the
			// queue once completed.
			a["OnlyFirst"] = "1"
		}
		return a, nil
	}
	if _, _, err := q.SubmitFactory(ctx, Factory{Cluster: cluster, Owner: "alice", Digest: []byte("{}"), Total: 3, Limit: 1}, "", 1000, build); err != nil {
		t.Fatal(err)
	}
	if err := q.Transition(ctx, JobID{cluster, 0}, Running, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Apply(ctx, []Change{{ID: JobID{cluster, 0}, To: Completed, Keep: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Get(ctx, JobID{cluster, 0}); err != nil {
		t.Fatalf("job 0 left the queue: %v", err)
	}
	if m, err := q.Materialize(ctx, cluster, 1000, build); err != nil || len(m) != 1 {
		t.Fatalf("Materialize: %v, %v", m, err)
	}
	j, err := q.Get(ctx, JobID{cluster, 1})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ attr, want string }{
		{"Args", `"1"`},
		{"OnlyFirst", "undefined"},
		{"Cmd", `"/bin/true"`},
		{AttrTotalSubmitProcs, "3"},
		{AttrMaterializeNext, "2"},
		{AttrMaterializeLimit, "1"},
	}
	for _, tt := range tests {
		if got, ok := j.Ad[tt.attr]; (ok || tt.want != "") && got != tt.want {
			t.Errorf("job 1's %s = %q, want %q", tt.attr, got, tt.want)
		}
	}
}
