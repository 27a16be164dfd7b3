package autoscale

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// TestWirePoolReadsAutoclusters runs a real schedd with idle jobs of two
// kinds from two owners, and checks that the policy reads one entry per
// autocluster of the schedd, not one per job, and groups them exactly as
// it groups the jobs read one by one.
func TestWirePoolReadsAutoclusters(t *testing.T) {
	ctx := context.Background()
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\nFILESYSTEM_DOMAIN = fs.example.org\n")); err != nil {
		t.Fatal(err)
	}
	s, err := schedd.New(ctx, schedd.Options{Config: cfg, Name: "schedd@submit", Address: "submit.example.org:9618", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	prefix := wire.PathPrefix + "schedd"
	mux.Handle(prefix+"/", http.StripPrefix(prefix, s.Handler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	addr := srv.Listener.Addr().String()
	dir := t.TempDir()
	sub := func(owner, text string) {
		t.Helper()
		f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tools.SubmitFile(ctx, wire.NewSchedd(addr, ""), f, submit.Options{Owner: owner, SubmitDir: dir,
			Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
			t.Fatalf("submit: %v", err)
		}
	}
	sub("root", "executable = /bin/true\narguments = $(Process)\nrequest_memory = 1G\nqueue 300\n")
	sub("root", "executable = /bin/true\narguments = $(Process)\nrequest_memory = 2G\nqueue 5\n")
	sub("nobody", "executable = /bin/true\narguments = $(Process)\nrequest_memory = 1G\nqueue 50\n")

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
