package schedd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// digestRequest reserves a cluster and makes the digest request of a
// submit file for it, as condor submit does for many jobs.
func digestRequest(t testing.TB, s *Schedd, f *submit.File, qdate time.Time) *wire.SubmitDigestRequest {
	t.Helper()
	ctx := context.Background()
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fa, err := f.NewFactory(ctx, submit.Options{ClusterID: nc.Cluster, Owner: "alice", ScheddName: nc.ScheddName, QDate: qdate})
	if err != nil {
		t.Fatal(err)
	}
	d, err := fa.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return &wire.SubmitDigestRequest{Cluster: nc.Cluster, Digest: d}
}

// TestSubmitDigest commits clusters from their submit file's digest: the
// jobs are those a submit of their ads queues, and a submit the queue
// limits refuse, or one of a job the digest cannot make, queues none.
func TestSubmitDigest(t *testing.T) {
	t.Parallel()
	many := fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", 2*jobqueue.EachBatch+5)
	// The last item makes a request_cpus that is no whole number: only
	// the schedd, making that job, finds it.
	var items strings.Builder
	for i := range 2*jobqueue.EachBatch + 1 {
		fmt.Fprintf(&items, "%d\n", 1+i%4)
	}
	items.WriteString("2.5\n")
	badLast := "executable = /bin/true\nrequest_cpus = $(m)\nqueue m from (\n" + items.String() + ")\n"
	tests := []struct {
		name  string
		knobs string
		src   string
		jobs  int
		err   error
		msg   string
	}{
		{name: "a cluster of three batches", src: many, jobs: 2*jobqueue.EachBatch + 5},
		{name: "items", src: "executable = /bin/echo\narguments = $(x)\nqueue x in (a, b, c)\n", jobs: 3},
		{name: "MAX_JOBS_PER_SUBMISSION counts them all", knobs: fmt.Sprintf("MAX_JOBS_PER_SUBMISSION = %d\n", 2*jobqueue.EachBatch+4),
			src: many, err: wire.ErrConflict, msg: "MAX_JOBS_PER_SUBMISSION"},
		{name: "MAX_JOBS_SUBMITTED", knobs: "MAX_JOBS_SUBMITTED = 1000\n", src: many, err: wire.ErrConflict, msg: "MAX_JOBS_SUBMITTED"},
		{name: "MAX_JOBS_PER_OWNER", knobs: "MAX_JOBS_PER_OWNER = 1000\n", src: many, err: wire.ErrConflict, msg: "MAX_JOBS_PER_OWNER"},
		{name: "a job the digest cannot make", src: badLast, err: wire.ErrBadRequest, msg: "not 2.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := scheddAt(t, t.TempDir(), tt.knobs)
			t.Cleanup(func() { s.Close() })
			qdate := time.Unix(1700000000, 0)
			f, err := submit.Parse(filepath.Join(t.TempDir(), "job.sub"), []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			req := digestRequest(t, s, f, qdate)
			resp, err := s.SubmitDigest(ctx, req)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("SubmitDigest: %v; want %v with %q", err, tt.err, tt.msg)
				}
				if n := queued(t, s); n != 0 {
					t.Fatalf("a refused submit left %d jobs", n)
				}
				if got := s.idle.len(); got != 0 {
					t.Fatalf("a refused submit left %d idle jobs to negotiate", got)
				}
				return
			}
			if err != nil || resp.Jobs != tt.jobs || resp.Cluster != req.Cluster {
				t.Fatalf("SubmitDigest = %+v, %v; want %d jobs of cluster %d", resp, err, tt.jobs, req.Cluster)
			}
			// The same jobs as a submit of their ads.
			nc, err := s.NewCluster(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := f.Jobs(ctx, submit.Options{ClusterID: nc.Cluster, Owner: "alice", ScheddName: nc.ScheddName, UIDDomain: nc.UIDDomain, QDate: qdate})
			if err != nil {
				t.Fatal(err)
			}
			ads := make([]wire.Ad, len(jobs))
			for i, j := range jobs {
				ads[i] = wire.Ad(j)
			}
			if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: ads}); err != nil {
				t.Fatal(err)
			}
			read := func(cluster int) []wire.Ad {
				got, err := s.q.Query(ctx, jobqueue.ClusterJobs(cluster), nil)
				if err != nil {
					t.Fatal(err)
				}
				out := make([]wire.Ad, len(got))
				for i, j := range got {
					out[i] = wire.Ad(j.Ad)
					for _, a := range []string{"ClusterId", "GlobalJobId", "EnteredCurrentStatus"} {
						delete(out[i], a)
					}
				}
				return out
			}
			if diff := cmp.Diff(read(nc.Cluster), read(req.Cluster)); diff != "" {
				t.Errorf("jobs from the digest differ from those submitted as ads (-ads +digest):\n%s", diff)
			}
			// A retry is answered and queues nothing more.
			if resp, err := s.SubmitDigest(ctx, req); err != nil || resp.Jobs != tt.jobs {
				t.Errorf("retry: %+v, %v", resp, err)
			}
			if n := queued(t, s); n != 2*tt.jobs {
				t.Errorf("the queue holds %d jobs, want %d", n, 2*tt.jobs)
			}
		})
	}
}

// peakHeap runs f and returns the most heap the process held meanwhile
// over what it held before, sampled every millisecond with the collector
// running often.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	stop := SamplePeakHeap()
	f()
	return stop()
}

// TestSubmitDigestMemory submits a cluster from its digest: the schedd's
// heap during the submit does not grow with the number of jobs.
func TestSubmitDigestMemory(t *testing.T) {
	if raceDetector {
		t.Skip("a heap bound: run without the race detector (make allocs)")
	}
	if testing.Short() {
		t.Skip("a submit of 16,000 jobs")
	}
	ctx := context.Background()
	s := scheddAt(t, t.TempDir(), "")
	t.Cleanup(func() { s.Close() })
	peak := map[int]uint64{}
	for _, n := range []int{1000, 16000} {
		f, err := submit.Parse(filepath.Join(t.TempDir(), "job.sub"),
			fmt.Appendf(nil, "executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n))
		if err != nil {
			t.Fatal(err)
		}
		req := digestRequest(t, s, f, time.Now())
		peak[n] = peakHeap(func() {
			if _, err := s.SubmitDigest(ctx, req); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%d jobs: peak heap %.1f MiB over the schedd's before", n, float64(peak[n])/(1<<20))
	}
	// The ads of 16,000 jobs, once, are some 40 MiB.
	if grew := int64(peak[16000]) - int64(peak[1000]); grew > 12<<20 {
		t.Errorf("the submit's peak heap grew by %.1f MiB from 1,000 to 16,000 jobs, want it flat", float64(grew)/(1<<20))
	}
}

// TestRefileIdleMemory files the idle jobs of one large cluster again
// (a negotiator asking with attributes new to the schedd, or a restart):
// the schedd's heap meanwhile does not grow with the cluster's size, and
// every job stays idle.
func TestRefileIdleMemory(t *testing.T) {
	if raceDetector {
		t.Skip("a heap bound: run without the race detector (make allocs)")
	}
	if testing.Short() {
		t.Skip("a cluster of 16,000 jobs")
	}
	ctx := context.Background()
	peak := map[int]uint64{}
	for _, n := range []int{1000, 16000} {
		s := scheddAt(t, t.TempDir(), "")
		t.Cleanup(func() { s.Close() })
		f, err := submit.Parse(filepath.Join(t.TempDir(), "job.sub"),
			fmt.Appendf(nil, "executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SubmitDigest(ctx, digestRequest(t, s, f, time.Now())); err != nil {
			t.Fatal(err)
		}
		peak[n] = peakHeap(func() { s.widen(ctx, []string{"HasSomethingNew"}) })
		t.Logf("%d jobs: peak heap %.1f MiB over the schedd's before", n, float64(peak[n])/(1<<20))
		s.mu.Lock()
		idle := s.idle.len()
		s.mu.Unlock()
		if idle != n {
			t.Fatalf("%d idle jobs after filing them again, want %d", idle, n)
		}
	}
	if grew := int64(peak[16000]) - int64(peak[1000]); grew > 12<<20 {
		t.Errorf("filing the idle jobs again: the peak heap grew by %.1f MiB from 1,000 to 16,000 jobs, want it flat", float64(grew)/(1<<20))
	}
}
