package schedd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// scheddAt is a schedd over the job queue in dir, with knobs.
func scheddAt(t testing.TB, dir, knobs string) *Schedd {
	t.Helper()
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\n"+knobs)); err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Options{Config: cfg, Name: "schedd@submit", Address: "submit.example.org:9618",
		DataDir: dir, Account: func(string) (*asuser.Account, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	// The tests look at the idle jobs as the schedd filed them at start.
	<-s.idleLoaded
	return s
}

// factoryRequest reserves a cluster and makes the factory request of a
// submit file for it.
func factoryRequest(t *testing.T, s *Schedd, src string, maxMat, maxIdle int) *wire.SubmitFactoryRequest {
	t.Helper()
	ctx := context.Background()
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := submit.Parse(filepath.Join(t.TempDir(), "job.sub"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	fa, err := f.NewFactory(ctx, submit.Options{ClusterID: nc.Cluster, Owner: "alice", ScheddName: nc.ScheddName})
	if err != nil {
		t.Fatal(err)
	}
	d, err := fa.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return &wire.SubmitFactoryRequest{Cluster: nc.Cluster, Digest: d, MaxMaterialize: maxMat, MaxIdle: maxIdle}
}

// procsOf returns the ProcIds of cluster's jobs in the queue.
func procsOf(t *testing.T, s *Schedd, cluster int) []int {
	t.Helper()
	jobs, err := s.q.Query(context.Background(), jobqueue.ClusterJobs(cluster), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, j := range jobs {
		out = append(out, j.ID.Proc)
	}
	return out
}

func TestSubmitFactory(t *testing.T) {
	t.Parallel()
	const ten = "executable = /bin/echo\narguments = $(Process) $(Item)\nqueue 2 in (a, b, c, d, e)\n"
	tests := []struct {
		name            string
		knobs, src      string
		maxMat, maxIdle int
		digest          string // replaces the request's when set
		want            []int  // procs in the queue after the submit
		err             error
		msg             string
	}{
		{name: "max_materialize", src: ten, maxMat: 3, want: []int{0, 1, 2}},
		{name: "max_idle", src: ten, maxIdle: 4, want: []int{0, 1, 2, 3}},
		{name: "both", src: ten, maxMat: 2, maxIdle: 4, want: []int{0, 1}},
		{name: "more room than jobs", src: ten, maxMat: 50, want: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "MAX_JOBS_SUBMITTED leaves room for two", knobs: "MAX_JOBS_SUBMITTED = 2\n", src: ten, maxMat: 5, want: []int{0, 1}},
		{name: "MAX_JOBS_PER_OWNER leaves none", knobs: "MAX_JOBS_PER_OWNER = 0\n", src: ten, maxMat: 5, want: nil},
		{name: "MAX_JOBS_PER_SUBMISSION counts the total", knobs: "MAX_JOBS_PER_SUBMISSION = 9\n", src: ten, maxMat: 5,
			err: wire.ErrConflict, msg: "MAX_JOBS_PER_SUBMISSION"},
		{name: "no limit", src: ten, err: wire.ErrBadRequest, msg: "max_materialize or max_idle"},
		{name: "negative limit", src: ten, maxMat: -1, err: wire.ErrBadRequest, msg: "max_materialize or max_idle"},
		{name: "bad digest", src: ten, maxMat: 1, digest: `{"source": 3}`, err: wire.ErrBadRequest, msg: "digest"},
		{name: "digest without owner", src: ten, maxMat: 1, digest: `{"name":"x","source":"queue\n","cluster":1,"max_jobs":5}`,
			err: wire.ErrBadRequest, msg: "owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := scheddAt(t, t.TempDir(), tt.knobs)
			defer s.Close()
			req := factoryRequest(t, s, tt.src, tt.maxMat, tt.maxIdle)
			if tt.digest != "" {
				req.Digest = []byte(tt.digest)
			}
			resp, err := s.SubmitFactory(ctx, req)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("SubmitFactory: %v; want %v with %q", err, tt.err, tt.msg)
				}
				if got := procsOf(t, s, req.Cluster); len(got) != 0 {
					t.Fatalf("refused, yet procs %v queued", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Jobs != 10 {
				t.Errorf("response: %d jobs, want the factory's 10", resp.Jobs)
			}
			if got := procsOf(t, s, req.Cluster); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("procs queued %v, want %v", got, tt.want)
			}
			// A retry queues nothing more.
			if _, err := s.SubmitFactory(ctx, req); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if got := procsOf(t, s, req.Cluster); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("after a retry, procs queued %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFactoryAcrossRestartAndRemove removes jobs of a factory's cluster
// one at a time, restarting the schedd on its queue in the middle: each
// removal lets the next proc in, with the ad an eager submit gives it,
// and condor rm of the cluster ends the factory.
func TestFactoryAcrossRestartAndRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := scheddAt(t, dir, "")
	const src = "executable = /bin/echo\narguments = $(Process) $(Item)\nqueue 2 in (a, b, c, d, e)\n"
	req := factoryRequest(t, s, src, 2, 0)
	cluster := req.Cluster
	if _, err := s.SubmitFactory(ctx, req); err != nil {
		t.Fatal(err)
	}
	f, _ := submit.Parse("job.sub", []byte(src))
	eager, err := f.Jobs(ctx, submit.Options{ClusterID: cluster, Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		remove  string
		restart bool
		want    string
	}{
		{"0", false, "[1 2]"},
		{"1", true, "[2 3]"},
		{"2", false, "[3 4]"},
		{"", false, "[]"}, // the whole cluster
	}
	for _, st := range steps {
		arg := fmt.Sprint(cluster)
		if st.remove != "" {
			arg += "." + st.remove
		}
		if _, err := s.Act(ctx, &wire.ActRequest{Action: wire.ActRemove, Args: []string{arg}}); err != nil {
			t.Fatal(err)
		}
		if st.restart {
			s.Close()
			s = scheddAt(t, dir, "")
		}
		s.materializeAll(ctx)
		s.materializeAll(ctx)
		if got := fmt.Sprint(procsOf(t, s, cluster)); got != st.want && !(st.want == "[]" && got == "[]") {
			t.Fatalf("after removing %s: procs %s, want %s", arg, got, st.want)
		}
	}
	defer s.Close()
	if fs, err := s.q.Factories(ctx); err != nil || len(fs) != 0 {
		t.Fatalf("factories after condor rm of the cluster: %+v, %v", fs, err)
	}
	j, err := s.q.Get(ctx, jobqueue.JobID{Cluster: cluster, Proc: 0})
	if err == nil {
		t.Fatalf("job 0 still queued: %v", j)
	}
	h, err := s.q.History(ctx, jobqueue.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, hj := range h {
		if want := eager[hj.ID.Proc]["Args"]; !strings.Contains(hj.Ad["Args"], strings.Trim(want, `"`)) {
			t.Errorf("proc %d: Args %s, want %s as an eager submit", hj.ID.Proc, hj.Ad["Args"], want)
		}
	}
}

// TestFactoryHoldRelease holds a factory's cluster (condor hold of the
// cluster id): the factory pauses, its cluster ad says so, and it makes
// nothing until condor release of the cluster.
func TestFactoryHoldRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := scheddAt(t, t.TempDir(), "")
	defer s.Close()
	req := factoryRequest(t, s, "executable = /bin/true\nqueue 10\n", 2, 0)
	c := req.Cluster
	if _, err := s.SubmitFactory(ctx, req); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		action string
		arg    string
		procs  string
		paused string
	}{
		{wire.ActHold, fmt.Sprint(c), "[0 1]", "1"},
		{wire.ActRemove, fmt.Sprintf("%d.0", c), "[1]", "1"},
		{wire.ActRelease, fmt.Sprintf("%d.1", c), "[1]", "1"}, // a job, not the cluster: still paused
		{wire.ActRelease, fmt.Sprint(c), "[1 2]", "0"},
	}
	for _, st := range steps {
		if _, err := s.Act(ctx, &wire.ActRequest{Action: st.action, Args: []string{st.arg}}); err != nil {
			t.Fatalf("%s %s: %v", st.action, st.arg, err)
		}
		s.materializeAll(ctx)
		if got := fmt.Sprint(procsOf(t, s, c)); got != st.procs {
			t.Fatalf("after %s %s: procs %s, want %s", st.action, st.arg, got, st.procs)
		}
		j, err := s.q.Get(ctx, jobqueue.JobID{Cluster: c, Proc: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := j.Ad[jobqueue.AttrMaterializePaused]; got != st.paused {
			t.Errorf("after %s %s: JobMaterializePaused %q, want %q", st.action, st.arg, got, st.paused)
		}
	}
}

// TestFactoryBadProcPauses submits a factory whose third item makes a
// bad expression: the first procs are made, then the factory pauses
// with JobMaterializePaused -1 rather than skipping the proc.
func TestFactoryBadProcPauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := scheddAt(t, t.TempDir(), "")
	defer s.Close()
	req := factoryRequest(t, s, "executable = /bin/true\n+Weight = $(x)\nqueue x in (1, 2, (((, 4)\n", 2, 0)
	c := req.Cluster
	if _, err := s.SubmitFactory(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Act(ctx, &wire.ActRequest{Action: wire.ActRemove, Args: []string{fmt.Sprintf("%d.0", c)}}); err != nil {
		t.Fatal(err)
	}
	s.materializeAll(ctx)
	s.materializeAll(ctx)
	if got := fmt.Sprint(procsOf(t, s, c)); got != "[1]" {
		t.Fatalf("procs %s, want [1]: the bad proc 2 neither made nor skipped", got)
	}
	fs, err := s.q.Factories(ctx)
	if err != nil || len(fs) != 1 || fs[0].Paused != jobqueue.FactoryError || fs[0].Next != 2 {
		t.Fatalf("factory %+v, %v; want paused (-1) at proc 2", fs, err)
	}
}
