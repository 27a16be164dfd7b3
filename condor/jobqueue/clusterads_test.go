package jobqueue

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// TestClusterAdKept reads the jobs of a cluster one at a time, as the
// schedd does as each starts and ends, and checks that the cluster's ad is
// read once and kept, that each job still gets its own attributes over the
// cluster's, and that the ad is dropped once the cluster's last job left.
func TestClusterAdKept(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	jobs := ads(3, "alice")
	for i := range jobs {
		jobs[i]["Args"] = strconv.Quote(fmt.Sprint(i))
	}
	cluster, err := q.Submit(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for p := range 3 {
		j, err := q.Get(ctx, JobID{cluster, p})
		if err != nil {
			t.Fatal(err)
		}
		if j.Ad["Args"] != strconv.Quote(fmt.Sprint(p)) || j.Ad["Owner"] != `"alice"` {
			t.Fatalf("job %d: %v", p, j.Ad)
		}
		// A change of the job's copy is the job's alone.
		j.Ad["Owner"] = `"mallory"`
		delete(j.Ad, "Cmd")
		if n := len(q.clusters.m); n != 1 {
			t.Fatalf("%d cluster ads kept after reading job %d, want 1", n, p)
		}
	}
	for p := range 3 {
		if err := q.Transition(ctx, JobID{cluster, p}, Running, nil); err != nil {
			t.Fatal(err)
		}
		if err := q.Transition(ctx, JobID{cluster, p}, Completed, nil); err != nil {
			t.Fatal(err)
		}
		if p < 2 {
			j, err := q.Get(ctx, JobID{cluster, p + 1})
			if err != nil || j.Ad["Owner"] != `"alice"` || j.Ad["Cmd"] == "" {
				t.Fatalf("job %d after job %d left: %v, %v", p+1, p, j.Ad, err)
			}
		}
	}
	if n := len(q.clusters.m); n != 0 {
		t.Errorf("%d cluster ads kept after the cluster left, want none", n)
	}
}

// TestClusterAdChangedWhileRead changes a cluster's ad (its factory paused
// and resumed) again and again while other readers read its job, and
// checks that a read after each change finds it: no reader that read the
// ad before a change keeps what it read after it.
func TestClusterAdChangedWhileRead(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	cluster, err := q.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	build := func(proc int) (Ad, error) {
		return Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5"}, nil
	}
	f := Factory{Cluster: cluster, Owner: "alice", Digest: []byte("{}"), Total: 20, Limit: 1}
	if _, made, err := q.SubmitFactory(ctx, f, "s1", 1000, build); err != nil || len(made) != 1 {
		t.Fatalf("SubmitFactory: %v, %v", made, err)
	}
	id := JobID{cluster, 0}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := q.Get(ctx, id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 200 {
		state := []int{FactoryHeld, FactoryRunning}[i%2]
		if ok, err := q.PauseFactory(ctx, cluster, state); err != nil || !ok {
			t.Fatalf("PauseFactory: %v, %v", ok, err)
		}
		j, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := j.Ad[AttrMaterializePaused]; got != strconv.Itoa(state) {
			close(stop)
			wg.Wait()
			t.Fatalf("change %d: %s is %s, want %d", i, AttrMaterializePaused, got, state)
		}
	}
	close(stop)
	wg.Wait()
}
