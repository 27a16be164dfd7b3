package schedd_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// scheddAddress is the API address the schedd under test believes it has;
// it appears in submit events.
const scheddAddress = "submit.example.org:9618"

// node is a schedd over a job queue in a temporary directory, served over
// HTTP as a node serves it, and a client of it.
type node struct {
	t     testing.TB
	knobs string // configuration lines on top of the test's
	data  string // the schedd's data directory (its job queue)
	jobs  string // the jobs' directory: Iwd, output and job log
	s     *schedd.Schedd
	srv   *httptest.Server
	c     *wire.Schedd
	logTo io.Writer // the schedd's log, when set
}

// start starts a schedd on a new data directory; it stops with the test.
func start(t testing.TB) *node { return startWith(t, "") }

// startWith starts a schedd with configuration lines knobs on top of the
// test's.
func startWith(t testing.TB, knobs string) *node {
	t.Helper()
	n := &node{t: t, data: t.TempDir(), jobs: t.TempDir(), knobs: knobs}
	n.open()
	t.Cleanup(n.stop)
	return n
}

// run runs the schedd's loops (Run) until the test ends, and returns the
// context they run under.
func (n *node) run() context.Context {
	n.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.s.Run(ctx) }()
	n.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			n.t.Error(err)
		}
	})
	return ctx
}

func (n *node) open() {
	n.t.Helper()
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\nFILESYSTEM_DOMAIN = fs.example.org\n"+n.knobs)); err != nil {
		n.t.Fatal(err)
	}
	var logger *slog.Logger
	if n.logTo != nil {
		logger = slog.New(slog.NewTextHandler(n.logTo, nil))
	}
	s, err := schedd.New(context.Background(), schedd.Options{Config: cfg, Name: "schedd@submit", Address: scheddAddress, DataDir: n.data, Logger: logger,
		// The made-up owners (alice, bob) have no accounts: their files are
		// the test's own.
		Account: func(string) (*asuser.Account, error) { return nil, nil }})
	if err != nil {
		n.t.Fatal(err)
	}
	mux := http.NewServeMux()
	prefix := wire.PathPrefix + "schedd"
	mux.Handle(prefix+"/", http.StripPrefix(prefix, s.Handler()))
	n.s, n.srv = s, httptest.NewServer(mux)
	n.c = wire.NewSchedd(n.srv.Listener.Addr().String(), "")
}

func (n *node) stop() {
	if n.s == nil {
		return
	}
	n.srv.Close()
	if err := n.s.Close(); err != nil {
		n.t.Error(err)
	}
	n.s = nil
}

// restart stops the schedd and starts another on the same data directory.
func (n *node) restart() {
	n.t.Helper()
	n.stop()
	n.open()
}

// submitFile submits a submit file's text as condor_submit does.
func (n *node) submitFile(owner, text string) *wire.SubmitResponse {
	n.t.Helper()
	f, err := submit.Parse(filepath.Join(n.jobs, "job.sub"), []byte(text))
	if err != nil {
		n.t.Fatal(err)
	}
	resp, err := tools.SubmitFile(context.Background(), n.c, f, submit.Options{Owner: owner, SubmitDir: n.jobs,
		Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		n.t.Fatalf("submit: %v", err)
	}
	return resp
}

// newCluster reserves a cluster.
func (n *node) newCluster() int {
	n.t.Helper()
	nc, err := n.c.NewCluster(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	return nc.Cluster
}

// ids returns the ids of the queued jobs a query selects.
func (n *node) ids(req *wire.QueryJobsRequest) []string {
	n.t.Helper()
	jobs, err := n.c.Queue(context.Background(), req)
	if err != nil {
		n.t.Fatal(err)
	}
	return jobIDs(jobs)
}

// idle returns the ids of the jobs the schedd offers the negotiator.
func (n *node) idle() []string {
	n.t.Helper()
	jobs, err := n.c.Idle(context.Background(), &wire.IdleRequest{})
	if err != nil {
		n.t.Fatal(err)
	}
	return jobIDs(jobs)
}

// job returns a queued job's ad.
func (n *node) job(id string) wire.Ad {
	n.t.Helper()
	jobs, err := n.c.Queue(context.Background(), &wire.QueryJobsRequest{Args: []string{id}})
	if err != nil || len(jobs) != 1 {
		n.t.Fatalf("job %s: %v, %v", id, jobs, err)
	}
	return jobs[0].Ad
}

// events returns the job log's events as "type cluster.proc" lines.
func (n *node) events() []string {
	n.t.Helper()
	f, err := os.Open(filepath.Join(n.jobs, "job.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type.String()+" "+strconv.Itoa(ev.Cluster)+"."+strconv.Itoa(ev.Proc))
	}
	return out
}

func jobIDs(jobs []wire.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// status returns the HTTP status of an error a client got, 0 for none.
func status(err error) int {
	if err == nil {
		return 0
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Status
	}
	return -1
}

// job is a hand-made job ad.
func job(owner string) wire.Ad {
	return wire.Ad{"Owner": strconv.Quote(owner), "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1"}
}

const threeJobs = "executable = /bin/echo\narguments = $(Process)\noutput = out.$(Process)\nlog = job.log\nqueue 3\n"

// TestNewClusterAndSubmit reserves clusters, submits a file as
// condor_submit does and checks what the jobs got from the schedd, then
// checks each refusal of a submit, which leaves the reservation usable.
func TestNewClusterAndSubmit(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	nc, err := n.c.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.NewClusterResponse{Cluster: 1, ScheddName: "schedd@submit", UIDDomain: "example.org", FileSystemDomain: "fs.example.org"}
	if diff := cmp.Diff(want, nc); diff != "" {
		t.Errorf("NewCluster (-want +got)\n%s", diff)
	}
	resp := n.submitFile("alice", threeJobs)
	if resp.Cluster != 2 || resp.Jobs != 3 {
		t.Fatalf("submit = %+v, want cluster 2 with 3 jobs", resp)
	}
	j := n.job("2.1")
	for attr, want := range map[string]string{"ClusterId": "2", "ProcId": "1", "Owner": `"alice"`, "User": `"alice@example.org"`,
		"FileSystemDomain": `"fs.example.org"`, "Out": `"out.1"`, "JobStatus": "1"} {
		if j[attr] != want {
			t.Errorf("job 2.1: %s = %s, want %s", attr, j[attr], want)
		}
	}
	if !strings.HasPrefix(j["GlobalJobId"], `"schedd@submit#2.1#`) {
		t.Errorf("job 2.1: GlobalJobId = %s", j["GlobalJobId"])
	}
	if got, want := n.idle(), []string{"2.0", "2.1", "2.2"}; !cmp.Equal(got, want) {
		t.Errorf("idle jobs %v, want %v", got, want)
	}
	if got, want := n.events(), []string{"SubmitEvent 2.0", "SubmitEvent 2.1", "SubmitEvent 2.2"}; !cmp.Equal(got, want) {
		t.Errorf("job log %v, want %v", got, want)
	}
	if got := n.ids(&wire.QueryJobsRequest{Args: []string{"1"}}); len(got) != 0 {
		t.Errorf("reserved cluster 1 holds %v", got)
	}

	withAttr := func(k, v string) []wire.Ad {
		a := job("alice")
		a[k] = v
		return []wire.Ad{a}
	}
	for _, tt := range []struct {
		name   string
		req    wire.SubmitRequest
		status int
		msg    string
	}{
		{"cluster never reserved", wire.SubmitRequest{Cluster: 99, Jobs: []wire.Ad{job("alice")}}, http.StatusNotFound, "cluster 99 was not reserved"},
		{"no cluster", wire.SubmitRequest{Jobs: []wire.Ad{job("alice")}}, http.StatusBadRequest, "reserve one with NewCluster"},
		{"no jobs", wire.SubmitRequest{Cluster: 1}, http.StatusBadRequest, "submit of no jobs"},
		{"job without an Owner", wire.SubmitRequest{Cluster: 1, Jobs: []wire.Ad{{"Cmd": `"/bin/true"`}}}, http.StatusBadRequest, "has no Owner"},
		{"job made for another cluster", wire.SubmitRequest{Cluster: 1, Jobs: withAttr("ClusterId", "2")}, http.StatusBadRequest, "made for cluster 2"},
		{"job out of its place", wire.SubmitRequest{Cluster: 1, Jobs: withAttr("ProcId", "1")}, http.StatusBadRequest, "has ProcId 1"},
		{"cluster committed", wire.SubmitRequest{Cluster: 2, Jobs: []wire.Ad{job("mallory")}}, http.StatusConflict, "already submitted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := n.c.Submit(ctx, &tt.req)
			if status(err) != tt.status || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want HTTP %d %q", err, tt.status, tt.msg)
			}
		})
	}
	if got, want := n.ids(&wire.QueryJobsRequest{}), []string{"2.0", "2.1", "2.2"}; !cmp.Equal(got, want) {
		t.Errorf("after refused submits the queue holds %v, want %v", got, want)
	}
	// The refusals left cluster 1 reserved; an ad without a GlobalJobId
	// gets one.
	resp, err = n.c.Submit(ctx, &wire.SubmitRequest{Cluster: 1, Jobs: []wire.Ad{job("bob")}})
	if err != nil || resp.Cluster != 1 || resp.Jobs != 1 {
		t.Fatalf("submit to reserved cluster 1 = %+v, %v", resp, err)
	}
	if g := n.job("1.0")["GlobalJobId"]; !strings.HasPrefix(g, `"schedd@submit#1.0#`) {
		t.Errorf("job 1.0: GlobalJobId = %s", g)
	}
}

// TestSubmitRetry submits the same request again, concurrently and after a
// restart: each gets the first answer, and the jobs are queued and logged
// once.
func TestSubmitRetry(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	cluster := n.newCluster()
	f, err := submit.Parse(filepath.Join(n.jobs, "job.sub"), []byte(threeJobs))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.Jobs(ctx, submit.Options{ClusterID: cluster, Owner: "alice", SubmitDir: n.jobs, ScheddName: "schedd@submit", Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	req := &wire.SubmitRequest{Cluster: cluster, Jobs: jobs}
	want := &wire.SubmitResponse{Cluster: cluster, Jobs: 3}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, err := n.c.Submit(ctx, req)
			if err != nil || !cmp.Equal(resp, want) {
				t.Errorf("submit = %+v, %v; want %+v", resp, err, want)
			}
		})
	}
	wg.Wait()
	check := func(when string) {
		t.Helper()
		if got, want := n.ids(&wire.QueryJobsRequest{}), []string{"1.0", "1.1", "1.2"}; !cmp.Equal(got, want) {
			t.Errorf("%s: queue holds %v, want %v", when, got, want)
		}
		if got, want := n.idle(), []string{"1.0", "1.1", "1.2"}; !cmp.Equal(got, want) {
			t.Errorf("%s: idle jobs %v, want %v", when, got, want)
		}
		if got, want := n.events(), []string{"SubmitEvent 1.0", "SubmitEvent 1.1", "SubmitEvent 1.2"}; !cmp.Equal(got, want) {
			t.Errorf("%s: job log %v, want %v", when, got, want)
		}
	}
	check("after concurrent retries")
	n.restart()
	if resp, err := n.c.Submit(ctx, req); err != nil || !cmp.Equal(resp, want) {
		t.Errorf("retry after a restart = %+v, %v; want %+v", resp, err, want)
	}
	check("after a retry after a restart")
	other := &wire.SubmitRequest{Cluster: cluster, Jobs: jobs[:2]}
	if _, err := n.c.Submit(ctx, other); status(err) != http.StatusConflict {
		t.Errorf("other jobs to the committed cluster: %v, want HTTP 409", err)
	}
}

// TestQuery selects jobs by condor_q's arguments, a constraint and both,
// and projects their ads.
func TestQuery(t *testing.T) {
	t.Parallel()
	n := start(t)
	n.submitFile("alice", threeJobs)
	n.submitFile("bob", "executable = /bin/true\nqueue 2\n")
	for _, tt := range []struct {
		name string
		req  wire.QueryJobsRequest
		want []string
	}{
		{"all", wire.QueryJobsRequest{}, []string{"1.0", "1.1", "1.2", "2.0", "2.1"}},
		{"a cluster", wire.QueryJobsRequest{Args: []string{"1"}}, []string{"1.0", "1.1", "1.2"}},
		{"a job", wire.QueryJobsRequest{Args: []string{"1.1"}}, []string{"1.1"}},
		{"an owner", wire.QueryJobsRequest{Args: []string{"bob"}}, []string{"2.0", "2.1"}},
		{"a job and an owner", wire.QueryJobsRequest{Args: []string{"1.2", "bob"}}, []string{"1.2", "2.0", "2.1"}},
		{"overlapping arguments once", wire.QueryJobsRequest{Args: []string{"1", "1.0"}}, []string{"1.0", "1.1", "1.2"}},
		{"a missing cluster", wire.QueryJobsRequest{Args: []string{"7"}}, []string{}},
		{"a constraint", wire.QueryJobsRequest{Constraint: `Owner == "bob"`}, []string{"2.0", "2.1"}},
		{"an owner's idle jobs", wire.QueryJobsRequest{Args: []string{"bob"}, Status: []int{1}}, []string{"2.0", "2.1"}},
		{"running jobs", wire.QueryJobsRequest{Status: []int{2}}, []string{}},
		{"arguments and a constraint", wire.QueryJobsRequest{Args: []string{"1"}, Constraint: "ProcId > 0"}, []string{"1.1", "1.2"}},
		{"a constraint on what the file set", wire.QueryJobsRequest{Constraint: `Out == "out.2"`}, []string{"1.2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := n.ids(&tt.req); !cmp.Equal(got, tt.want) {
				t.Errorf("jobs %v, want %v", got, tt.want)
			}
			// Streamed: the same jobs with the same ads.
			whole, err := n.c.Queue(context.Background(), &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var streamed []wire.Job
			if err := n.c.QueueEach(context.Background(), &tt.req, func(j wire.Job) error { streamed = append(streamed, j); return nil }); err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(streamed, whole, cmpopts.EquateEmpty()) {
				t.Errorf("streamed %v, want %v", streamed, whole)
			}
			// Counted: as many jobs, each id within its group's range.
			sum, err := n.c.QueueSummary(context.Background(), &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, g := range sum.Groups {
				total += g.Jobs
				if g.Status != 1 || g.FirstProc > g.LastProc || g.QDate == 0 || g.Owner == "" {
					t.Errorf("group %+v", g)
				}
			}
			if total != len(tt.want) {
				t.Errorf("summary counts %d jobs (%+v), want %d", total, sum.Groups, len(tt.want))
			}
		})
	}
	for _, query := range []func(*wire.QueryJobsRequest) ([]wire.Job, error){
		func(req *wire.QueryJobsRequest) ([]wire.Job, error) { return n.c.Queue(context.Background(), req) },
		func(req *wire.QueryJobsRequest) (out []wire.Job, err error) {
			err = n.c.QueueEach(context.Background(), req, func(j wire.Job) error { out = append(out, j); return nil })
			return out, err
		},
	} {
		jobs, err := query(&wire.QueryJobsRequest{Args: []string{"2.1"}, Projection: []string{"Owner", "procid", "NoSuchAttr"}})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("projection: %v, %v", jobs, err)
		}
		if want := (wire.Ad{"Owner": `"bob"`, "ProcId": "1"}); !cmp.Equal(jobs[0].Ad, want) {
			t.Errorf("projected ad %v, want %v", jobs[0].Ad, want)
		}
	}
	idle, err := n.c.Idle(context.Background(), &wire.IdleRequest{Owner: "bob"})
	if got, want := jobIDs(idle), []string{"2.0", "2.1"}; err != nil || !cmp.Equal(got, want) {
		t.Errorf("bob's idle jobs %v, %v; want %v", got, err, want)
	}
	for _, bad := range []wire.QueryJobsRequest{{Constraint: "Owner =="}, {Args: []string{"0"}}, {Args: []string{"1.x"}}, {Args: []string{`"alice"`}}, {Status: []int{9}}} {
		if _, err := n.c.Queue(context.Background(), &bad); status(err) != http.StatusBadRequest {
			t.Errorf("query %+v: %v, want HTTP 400", bad, err)
		}
		if err := n.c.QueueEach(context.Background(), &bad, func(wire.Job) error { return nil }); status(err) != http.StatusBadRequest {
			t.Errorf("streamed query %+v: %v, want HTTP 400", bad, err)
		}
		if _, err := n.c.QueueSummary(context.Background(), &bad); status(err) != http.StatusBadRequest {
			t.Errorf("summary %+v: %v, want HTTP 400", bad, err)
		}
	}
}

// TestHistory removes jobs one by one and reads the history back, most
// recent first, bounded by a limit and narrowed by arguments and a
// constraint.
func TestHistory(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	n.submitFile("alice", threeJobs)
	n.submitFile("bob", "executable = /bin/true\nqueue 1\n")
	for _, id := range []string{"1.0", "2.0", "1.2", "1.1"} {
		if _, err := n.c.Act(ctx, &wire.ActRequest{Action: wire.ActRemove, Args: []string{id}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		req  wire.QueryJobsRequest
		want []string
	}{
		{"all", wire.QueryJobsRequest{}, []string{"1.1", "1.2", "2.0", "1.0"}},
		{"the last two", wire.QueryJobsRequest{Limit: 2}, []string{"1.1", "1.2"}},
		{"a cluster", wire.QueryJobsRequest{Args: []string{"1"}}, []string{"1.1", "1.2", "1.0"}},
		{"a cluster's last", wire.QueryJobsRequest{Args: []string{"1"}, Limit: 1}, []string{"1.1"}},
		{"an owner", wire.QueryJobsRequest{Args: []string{"bob"}}, []string{"2.0"}},
		{"a constraint", wire.QueryJobsRequest{Constraint: "ProcId == 0"}, []string{"2.0", "1.0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := n.c.History(ctx, &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := jobIDs(jobs); !cmp.Equal(got, tt.want) {
				t.Errorf("history %v, want %v", got, tt.want)
			}
		})
	}
	jobs, err := n.c.History(ctx, &wire.QueryJobsRequest{Args: []string{"2.0"}, Projection: []string{"JobStatus", "RemoveReason"}})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("projection: %v, %v", jobs, err)
	}
	if want := (wire.Ad{"JobStatus": "3", "RemoveReason": `"via condor_rm"`}); !cmp.Equal(jobs[0].Ad, want) {
		t.Errorf("projected history ad %v, want %v", jobs[0].Ad, want)
	}
	if got := n.ids(&wire.QueryJobsRequest{}); len(got) != 0 {
		t.Errorf("removed jobs still queued: %v", got)
	}
}

// TestAct holds, releases and removes jobs by id, owner, constraint and
// all, checking what each changed, the jobs' states, the idle set and the
// job log, and refuses requests that select nothing or make no sense.
func TestAct(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	n.submitFile("alice", threeJobs)
	n.submitFile("bob", "executable = /bin/true\nqueue 1\n")
	steps := []struct {
		name    string
		req     wire.ActRequest
		changed []string
		idle    []string
	}{
		{"hold a job", wire.ActRequest{Action: wire.ActHold, Args: []string{"1.0"}}, []string{"1.0"}, []string{"1.1", "1.2", "2.0"}},
		{"hold by constraint", wire.ActRequest{Action: wire.ActHold, Constraint: "ProcId == 1", Reason: "testing"}, []string{"1.1"}, []string{"1.2", "2.0"}},
		{"hold held jobs again", wire.ActRequest{Action: wire.ActHold, Args: []string{"1.0", "1.1"}}, []string{}, []string{"1.2", "2.0"}},
		{"release an owner's held jobs", wire.ActRequest{Action: wire.ActRelease, Args: []string{"alice"}}, []string{"1.0", "1.1"}, []string{"1.0", "1.1", "1.2", "2.0"}},
		{"remove a missing cluster", wire.ActRequest{Action: wire.ActRemove, Args: []string{"99"}}, []string{}, []string{"1.0", "1.1", "1.2", "2.0"}},
		{"remove a cluster", wire.ActRequest{Action: wire.ActRemove, Args: []string{"2"}}, []string{"2.0"}, []string{"1.0", "1.1", "1.2"}},
		{"remove all", wire.ActRequest{Action: wire.ActRemove, All: true, Reason: "done"}, []string{"1.0", "1.1", "1.2"}, []string{}},
	}
	for _, st := range steps {
		resp, err := n.c.Act(ctx, &st.req)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if resp.Count != len(st.changed) {
			t.Errorf("%s: changed %d jobs, want %v", st.name, resp.Count, st.changed)
		}
		// The jobs named one by one are listed; the others counted.
		listed := []string{}
		for _, id := range st.changed {
			if slices.Contains(st.req.Args, id) {
				listed = append(listed, id)
			}
		}
		if !cmp.Equal(resp.Changed, listed) {
			t.Errorf("%s: listed %v, want %v", st.name, resp.Changed, listed)
		}
		if got := n.idle(); !cmp.Equal(got, st.idle) {
			t.Errorf("%s: idle jobs %v, want %v", st.name, got, st.idle)
		}
		if st.name == "hold by constraint" {
			if j := n.job("1.1"); j["JobStatus"] != "5" || j["HoldReason"] != `"testing"` {
				t.Errorf("held job 1.1: JobStatus %s, HoldReason %s", j["JobStatus"], j["HoldReason"])
			}
		}
	}
	hist, err := n.c.History(ctx, &wire.QueryJobsRequest{Args: []string{"1.2"}, Projection: []string{"RemoveReason"}})
	if err != nil || len(hist) != 1 || hist[0].Ad["RemoveReason"] != `"done"` {
		t.Errorf("removed job 1.2: %v, %v", hist, err)
	}
	want := []string{"SubmitEvent 1.0", "SubmitEvent 1.1", "SubmitEvent 1.2", "JobHeldEvent 1.0", "JobHeldEvent 1.1",
		"JobReleaseEvent 1.0", "JobReleaseEvent 1.1", "JobAbortedEvent 1.0", "JobAbortedEvent 1.1", "JobAbortedEvent 1.2"}
	if diff := cmp.Diff(want, n.events()); diff != "" {
		t.Errorf("job log (-want +got)\n%s", diff)
	}
	for _, bad := range []wire.ActRequest{
		{Action: wire.ActRemove},
		{Action: "vaporize", All: true},
		{Action: wire.ActHold, Args: []string{"1.x"}},
		{Action: wire.ActHold, Constraint: "Owner =="},
	} {
		if _, err := n.c.Act(ctx, &bad); status(err) != http.StatusBadRequest {
			t.Errorf("act %+v: %v, want HTTP 400", bad, err)
		}
	}
}

// running submits n jobs writing out.N in the jobs' directory, starts them
// as a shadow would (job i running on claim-i), and restarts the schedd,
// which recovers their claims from the queue.
func (n *node) running(jobs int) {
	n.t.Helper()
	ctx := context.Background()
	resp := n.submitFile("alice", "executable = /bin/echo\noutput = out.$(Process)\nlog = job.log\nqueue "+strconv.Itoa(jobs)+"\n")
	for p := range jobs {
		id := jobqueue.JobID{Cluster: resp.Cluster, Proc: p}
		attrs := jobqueue.Ad{"PondClaimId": strconv.Quote("claim-" + strconv.Itoa(p)), "RemoteHost": `"slot1@exec"`}
		if err := n.s.Queue().Transition(ctx, id, jobqueue.Running, attrs); err != nil {
			n.t.Fatal(err)
		}
	}
	n.restart()
}

// TestJobReports sends a starter's reports on running jobs: each moves its
// job to its next state, writes its events and, on exit, the job's output.
func TestJobReports(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	n.running(4)
	report := func(r wire.JobReport) error {
		r.Startd, r.SlotName = "", "slot1@exec"
		return n.c.JobReport(ctx, &r)
	}
	if info, err := n.c.ClaimInfo(ctx, &wire.ClaimInfoRequest{ClaimID: "claim-0"}); err != nil || !info.Exists || !info.Active || info.JobID != "1.0" {
		t.Fatalf("recovered claim-0: %+v, %v", info, err)
	}
	for _, tt := range []struct {
		name   string
		r      wire.JobReport
		status int
	}{
		{"unknown claim", wire.JobReport{ClaimID: "claim-9", JobID: "1.0", Kind: wire.ReportExited}, http.StatusNotFound},
		{"another job's claim", wire.JobReport{ClaimID: "claim-1", JobID: "1.0", Kind: wire.ReportExited}, http.StatusNotFound},
		{"bad job id", wire.JobReport{ClaimID: "claim-0", JobID: "one", Kind: wire.ReportExited}, http.StatusBadRequest},
		{"unknown kind", wire.JobReport{ClaimID: "claim-0", JobID: "1.0", Kind: "exploded"}, http.StatusBadRequest},
		{"update", wire.JobReport{ClaimID: "claim-0", JobID: "1.0", Kind: wire.ReportUpdate, ResidentKB: 2048, MemoryUsageMB: 40, CpusUsage: 0.5, UserCPU: 3}, 0},
	} {
		if err := report(tt.r); status(err) != tt.status {
			t.Errorf("%s: %v, want HTTP status %d", tt.name, err, tt.status)
		}
	}
	if j := n.job("1.0"); j["JobStatus"] != "2" {
		t.Fatalf("job 1.0 is no longer running after refused reports and an update: JobStatus %s", j["JobStatus"])
	}
	// The update's usage is in the running job's ad.
	for attr, want := range map[string]string{"ResidentSetSize": "2048", "MemoryUsage": "40", "CpusUsage": "0.500", "RemoteUserCpu": "3.000"} {
		if got := n.job("1.0")[attr]; got != want {
			t.Errorf("running job 1.0 after an update: %s = %s, want %s", attr, got, want)
		}
	}

	// Job 1.0's stdout arrives, under its claim; copies under another
	// claim (an earlier attempt's) are refused and leave nothing.
	send := func(claim, job string, data string) (*wire.FileInfo, error) {
		return n.c.SendOutput(ctx, wire.TransferHeader{ClaimID: claim, JobID: job, Stream: wire.StreamStdout},
			func(tw *wire.TransferWriter) error {
				if _, err := tw.Write([]byte(data)); err != nil {
					return err
				}
				_, err := tw.End()
				return err
			})
	}
	for _, claim := range []string{"claim-9", "claim-1"} {
		if _, err := send(claim, "1.0", "stale\n"); status(err) != http.StatusNotFound {
			t.Errorf("stdout of 1.0 under %s: %v, want HTTP status 404", claim, err)
		}
	}
	stdout, err := send("claim-0", "1.0", "hello\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.jobs, "out.0")); err == nil {
		t.Error("out.0 is in place before the job's final report")
	}

	// Job 1.3 is held while it runs: its eviction leaves it held.
	if _, err := n.c.Act(ctx, &wire.ActRequest{Action: wire.ActHold, Args: []string{"1.3"}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []wire.JobReport{
		{ClaimID: "claim-0", JobID: "1.0", Kind: wire.ReportExited, ExitCode: 0, Outputs: []wire.FileInfo{*stdout}, ImageSizeKB: 4096, ResidentKB: 2048, WallClock: 1.5, MemoryUsageMB: 50},
		{ClaimID: "claim-1", JobID: "1.1", Kind: wire.ReportHold, HoldReason: "over its memory request", HoldCode: 34},
		{ClaimID: "claim-2", JobID: "1.2", Kind: wire.ReportEvicted},
		{ClaimID: "claim-3", JobID: "1.3", Kind: wire.ReportEvicted},
	} {
		if err := report(r); err != nil {
			t.Fatalf("report %s on %s: %v", r.Kind, r.JobID, err)
		}
	}
	hist, err := n.c.History(ctx, &wire.QueryJobsRequest{Args: []string{"1.0"}})
	if err != nil || len(hist) != 1 {
		t.Fatalf("history of 1.0: %v, %v", hist, err)
	}
	for attr, want := range map[string]string{"JobStatus": "4", "ExitCode": "0", "ExitBySignal": "false", "ImageSize": "4096", "RemoteWallClockTime": "1.500", "MemoryUsage": "50", "ResidentSetSize": "2048"} {
		if got := hist[0].Ad[attr]; got != want {
			t.Errorf("completed job 1.0: %s = %s, want %s", attr, got, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(n.jobs, "out.0")); err != nil || string(b) != "hello\n" {
		t.Errorf("out.0 = %q, %v", b, err)
	}
	if j := n.job("1.1"); j["JobStatus"] != "5" || j["HoldReason"] != `"over its memory request"` || j["HoldReasonCode"] != "34" {
		t.Errorf("job 1.1: JobStatus %s, HoldReason %s, HoldReasonCode %s", j["JobStatus"], j["HoldReason"], j["HoldReasonCode"])
	}
	if got := n.job("1.2")["JobStatus"]; got != "1" {
		t.Errorf("evicted job 1.2: JobStatus %s, want 1", got)
	}
	if got := n.job("1.3")["JobStatus"]; got != "5" {
		t.Errorf("job 1.3 held then evicted: JobStatus %s, want 5", got)
	}
	if got, want := n.idle(), []string{"1.2"}; !cmp.Equal(got, want) {
		t.Errorf("idle jobs %v, want %v", got, want)
	}
	var got []string
	for _, ev := range n.events() {
		if !strings.HasPrefix(ev, "SubmitEvent") {
			got = append(got, ev)
		}
	}
	// The first report of a job recovered after the restart reconnects
	// the schedd to it (023), as HTCondor's shadow does.
	want := []string{"JobReconnectedEvent 1.0", "FileTransferEvent 1.0", "JobHeldEvent 1.3", "FileTransferEvent 1.0", "JobImageSizeEvent 1.0",
		"JobTerminatedEvent 1.0", "JobReconnectedEvent 1.1", "JobHeldEvent 1.1", "JobEvictedEvent 1.2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job log after the submit events (-want +got)\n%s", diff)
	}
	// The claims are given up once their jobs left them.
	deadline := time.Now().Add(10 * time.Second)
	for c := range 4 {
		id := "claim-" + strconv.Itoa(c)
		for {
			info, err := n.c.ClaimInfo(ctx, &wire.ClaimInfoRequest{ClaimID: id})
			if err != nil {
				t.Fatal(err)
			}
			if !info.Exists {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is still held: %+v", id, info)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestRecovery restarts the schedd on its job queue: queued jobs, the idle
// set, the claims of running jobs and cluster reservations come back.
func TestRecovery(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	n.running(1)
	n.submitFile("alice", threeJobs)
	if _, err := n.c.Act(ctx, &wire.ActRequest{Action: wire.ActHold, Args: []string{"2.1"}}); err != nil {
		t.Fatal(err)
	}
	reserved := n.newCluster()
	n.restart()
	if got, want := n.ids(&wire.QueryJobsRequest{}), []string{"1.0", "2.0", "2.1", "2.2"}; !cmp.Equal(got, want) {
		t.Errorf("queue after a restart %v, want %v", got, want)
	}
	if got, want := n.idle(), []string{"2.0", "2.2"}; !cmp.Equal(got, want) {
		t.Errorf("idle jobs after a restart %v, want %v", got, want)
	}
	var states []string
	for _, id := range []string{"1.0", "2.0", "2.1", "2.2"} {
		states = append(states, n.job(id)["JobStatus"])
	}
	if want := []string{"2", "1", "5", "1"}; !slices.Equal(states, want) {
		t.Errorf("states after a restart %v, want %v", states, want)
	}
	if info, err := n.c.ClaimInfo(ctx, &wire.ClaimInfoRequest{ClaimID: "claim-0"}); err != nil || !info.Exists || info.JobID != "1.0" {
		t.Errorf("claim of running job 1.0 after a restart: %+v, %v", info, err)
	}
	if c := n.newCluster(); c != reserved+1 {
		t.Errorf("NewCluster after a restart = %d, want %d", c, reserved+1)
	}
	if resp, err := n.c.Submit(ctx, &wire.SubmitRequest{Cluster: reserved, Jobs: []wire.Ad{job("carol")}}); err != nil || resp.Jobs != 1 {
		t.Errorf("submit to cluster %d reserved before the restart: %+v, %v", reserved, resp, err)
	}
	if got, want := n.idle(), []string{"2.0", "2.2", strconv.Itoa(reserved) + ".0"}; !cmp.Equal(got, want) {
		t.Errorf("idle jobs %v, want %v", got, want)
	}
}
