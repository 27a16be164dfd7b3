package autoscale

import (
	"context"
	"net/http"
	"testing"

	"github.com/pond-htc/pond/condor/schedd/scheddtest"
	"github.com/pond-htc/pond/condor/wire"
)

// TestWirePoolReadsAutoclusters runs a real schedd with idle jobs of two
// kinds from two owners, and checks that the policy reads one entry per
// autocluster of the schedd, not one per job, and groups them exactly as
// it groups the jobs read one by one.
func TestWirePoolReadsAutoclusters(t *testing.T) {
	ctx := context.Background()
	s := scheddtest.New(t)
	addr := scheddtest.Serve(t, map[string]http.Handler{wire.PathPrefix + "schedd": s.Handler()})
	scheddtest.Submit(t, addr, "root", "executable = /bin/true\narguments = $(Process)\nrequest_memory = 1G\nqueue 300\n")
	scheddtest.Submit(t, addr, "root", "executable = /bin/true\narguments = $(Process)\nrequest_memory = 2G\nqueue 5\n")
	scheddtest.Submit(t, addr, "nobody", "executable = /bin/true\narguments = $(Process)\nrequest_memory = 1G\nqueue 50\n")

	w := &WirePool{Schedd: addr}
	got, err := w.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("the policy read %d entries for 3 autoclusters of 355 jobs", len(got))
	}
	// The same queue read job by job.
	each, err := wire.NewSchedd(addr, "").Queue(ctx, &wire.QueryJobsRequest{Constraint: "JobStatus == 1"})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for _, j := range each {
		ad, err := wire.ToClassAd(j.Ad)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, Job{ID: j.ID, Ad: ad})
	}
	want := groupJobs(jobs)
	for _, g := range want {
		if len(g.ids) > maxJobIDs {
			t.Fatalf("group %s keeps %d ids", g.key, len(g.ids))
		}
	}
	gs := groupJobs(got)
	if len(gs) != 2 || len(gs) != len(want) {
		t.Fatalf("%d groups, want 2 (%d read job by job)", len(gs), len(want))
	}
	for i := range gs {
		if gs[i].key != want[i].key || gs[i].idle != want[i].idle || gs[i].running != want[i].running {
			t.Errorf("group %d: %s with %d idle, %d running; want %s with %d, %d", i, gs[i].key, gs[i].idle, gs[i].running,
				want[i].key, want[i].idle, want[i].running)
		}
		if len(gs[i].ids) != len(want[i].ids) || len(gs[i].ids) > 0 && gs[i].ids[0] != want[i].ids[0] ||
			len(gs[i].ids) > 0 && gs[i].ids[len(gs[i].ids)-1] != want[i].ids[len(want[i].ids)-1] {
			t.Errorf("group %d: ids %v, want %v", i, gs[i].ids, want[i].ids)
		}
	}
	if gs[0].idle != 350 || gs[1].idle != 5 {
		t.Errorf("groups of %d and %d idle jobs, want 350 and 5", gs[0].idle, gs[1].idle)
	}
}
