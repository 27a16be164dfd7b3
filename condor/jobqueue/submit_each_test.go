package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// eachJobs are n jobs whose attributes change across SubmitClusterEach's
// batches: Phase is shared within the first batch only, Early is in its
// jobs only, Late in the later jobs only, and Args differs in every job.
func eachJobs(n int) []Ad {
	out := make([]Ad, n)
	for i := range out {
		phase := "1"
		if i >= EachBatch {
			phase = "2"
		}
		out[i] = Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "Args": strconv.Quote(fmt.Sprint(i)), "Phase": phase,
			"QDate": "1700000000", "EnteredCurrentStatus": "1700000000"}
		if i >= EachBatch {
			out[i]["Late"] = "true"
		} else {
			out[i]["Early"] = "true"
		}
	}
	return out
}

// TestSubmitClusterEach stores clusters a job at a time and reads them
// back as SubmitCluster would have stored them; a submit that fails part
// way (a job that cannot be made, a caller gone) leaves no job of the
// cluster, which a later submit may still commit.
func TestSubmitClusterEach(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	n := 2*EachBatch + 3
	jobs := eachJobs(n)
	ref, err := q.Submit(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	read := func(cluster int) []Ad {
		t.Helper()
		got, err := q.Query(ctx, ClusterJobs(cluster), nil)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]Ad, len(got))
		for i, j := range got {
			out[i] = j.Ad
			delete(out[i], "ClusterId")
		}
		return out
	}
	want := read(ref)
	errBuild := errors.New("cannot make this job")
	for _, tt := range []struct {
		name    string
		n       int
		failAt  int // build fails at this proc; -1 never
		cancel  int // ctx is cancelled when this proc is built; -1 never
		wantErr string
	}{
		{"one batch", 5, -1, -1, ""},
		{"three batches", n, -1, -1, ""},
		{"a job that cannot be made, in the last batch", n, n - 1, -1, "cannot make this job"},
		{"a job that cannot be made, in the first", n, 3, -1, "cannot make this job"},
		{"the caller gone in the second batch", n, -1, EachBatch + 1, "context canceled"},
		{"no jobs", 0, -1, -1, "zero jobs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := q.NewCluster(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			built := 0
			build := func(proc int) (Ad, error) {
				built++
				if proc == tt.failAt {
					return nil, errBuild
				}
				if proc == tt.cancel {
					cancel()
				}
				j := Ad{}
				for k, v := range jobs[proc] {
					j[k] = v
				}
				return j, nil
			}
			retry, err := q.SubmitClusterEach(cctx, c, tt.n, "s", build)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || retry {
					t.Fatalf("err = %v (retry %v), want %q", err, retry, tt.wantErr)
				}
				if got := read(c); len(got) != 0 {
					t.Fatalf("a failed submit left %d jobs of cluster %d", len(got), c)
				}
				if counts, err := q.ClusterCounts(ctx, ClusterJobs(c)); err != nil || len(counts) != 0 && counts[0].Jobs != 0 {
					t.Fatalf("a failed submit left counts %+v (%v)", counts, err)
				}
				// The cluster is still only reserved: a good submit commits it.
				if _, err := q.SubmitClusterEach(ctx, c, 1, "again", func(int) (Ad, error) { return Ad{"Owner": `"alice"`}, nil }); err != nil {
					t.Fatalf("commit after the failed one: %v", err)
				}
				return
			}
			if err != nil || retry {
				t.Fatalf("SubmitClusterEach: retry %v, %v", retry, err)
			}
			if built != tt.n {
				t.Errorf("built %d jobs, want %d (each once)", built, tt.n)
			}
			got := read(c)
			// A job that lacks an attribute of the cluster ad (the first
			// batch's) has it undefined.
			w := make([]Ad, tt.n)
			for i := range w {
				w[i] = Ad{}
				for k, v := range want[i] {
					w[i][k] = v
				}
				if tt.n > EachBatch && i >= EachBatch {
					w[i]["Early"] = "undefined"
				}
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("stored jobs differ from SubmitCluster's (-want +got):\n%s", diff)
			}
			if retry, err := q.SubmitClusterEach(ctx, c, tt.n, "s", build); err != nil || !retry {
				t.Errorf("the same submission again: retry %v, %v; want a retry", retry, err)
			}
			if _, err := q.SubmitClusterEach(ctx, c, tt.n, "other", build); !errors.Is(err, ErrClusterCommitted) {
				t.Errorf("another submission: %v, want ErrClusterCommitted", err)
			}
			if got := read(c); len(got) != tt.n {
				t.Errorf("after the retries cluster %d holds %d jobs, want %d", c, len(got), tt.n)
			}
		})
	}
	if _, err := q.SubmitClusterEach(ctx, 999, 1, "s", func(int) (Ad, error) { return Ad{"Owner": `"a"`}, nil }); !errors.Is(err, ErrNoCluster) {
		t.Errorf("a cluster never reserved: %v, want ErrNoCluster", err)
	}
}
