package daemon_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/wire"
)

// machineAds returns the slot ads the collector of cm holds for machine.
func machineAds(t *testing.T, cm *testpool.Node, machine string) []*classad.Ad {
	t.Helper()
	found, err := cm.Client().Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine,
		Constraint: "Machine == " + strconv.Quote(machine)})
	if err != nil {
		t.Fatal(err)
	}
	var out []*classad.Ad
	for _, a := range found {
		ad, err := wire.ToClassAd(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ad)
	}
	return out
}

func quarantinedAd(t *testing.T, cm *testpool.Node, machine string) (bool, string) {
	for _, ad := range machineAds(t, cm, machine) {
		if q, _ := ad.EvalAttr("PondQuarantined").BoolValue(); q {
			r, _ := ad.EvalAttr("PondQuarantineReason").StringValue()
			return true, r
		}
	}
	return false, ""
}

// readJobLog reads the event log at path.
func readJobLog(path string) []joblog.Event {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	evs, _ := joblog.ReadAll(f, time.Local)
	return evs
}

// TestBlackholeNodeQuarantined runs jobs on a node that cannot start any
// (a black hole: a file stands where its execute directory should be, as
// when its file system broke). After three in a row the node is
// quarantined: its ads say so and why, it matches no job, and the jobs,
// back in the queue, all run on the healthy node that joins. An
// administrator lifts the quarantine.
func TestBlackholeNodeQuarantined(t *testing.T) {
	t.Parallel()
	health := testpool.Knobs{startd.KnobBlackholeFailures: "3", startd.KnobQuarantineTime: "600"}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	bad := testpool.Start(t, "bad", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}, health)
	execute := bad.Master.Startd().ExecuteDir()
	if err := os.RemoveAll(execute); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(execute, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	if err := os.WriteFile(filepath.Join(jobDir, "job.sh"), []byte("#!/bin/sh\necho ok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	first := submitFile(t, cm, jobDir, "executable = job.sh\nlog = first.log\nqueue 3\n")
	testpool.Eventually(t, 60*time.Second, "the black hole to be quarantined", func() bool {
		q, _ := quarantinedAd(t, cm, "bad")
		return q
	})
	_, reason := quarantinedAd(t, cm, "bad")
	if !strings.Contains(reason, "3 jobs in a row could not start") || !strings.Contains(reason, "scratch directory") {
		t.Errorf("PondQuarantineReason = %q", reason)
	}
	if q := bad.Master.Startd().Quarantined(); q == nil || q.Reason != reason {
		t.Errorf("the startd's quarantine %+v, its ad's reason %q", q, reason)
	}

	testpool.Start(t, "good", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}, health)
	next := submitFile(t, cm, jobDir, "executable = job.sh\noutput = out.$(Process)\nlog = next.log\nqueue 4\n")
	// The jobs the black hole could not start went back to the queue and
	// run on the good node too.
	done := fmt.Sprintf("ClusterId == %d || ClusterId == %d", first, next)
	testpool.Eventually(t, 60*time.Second, "the jobs to complete", func() bool {
		hist, _ := cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{Constraint: done})
		return len(hist) == 7
	})
	hist, _ := cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{Constraint: fmt.Sprintf("ClusterId == %d", next)})
	for _, j := range hist {
		if host := j.Ad["LastRemoteHost"]; !strings.Contains(host, "@good") || j.Ad["ExitCode"] != "0" || j.Ad["NumJobStarts"] != "1" {
			t.Errorf("job %s ran on %s with exit code %s, %s starts; want once on the good node with 0", j.ID, host, j.Ad["ExitCode"], j.Ad["NumJobStarts"])
		}
	}
	for _, ev := range readJobLog(filepath.Join(jobDir, "next.log")) {
		if ev.Type == joblog.Execute && strings.Contains(ev.SlotName, "@bad") {
			t.Errorf("a job started on the quarantined node: %+v", ev)
		}
	}

	if !bad.Master.Startd().Lift("administrator") {
		t.Fatal("no quarantine to lift")
	}
	testpool.Eventually(t, 20*time.Second, "the lifted quarantine to leave the ads", func() bool {
		q, _ := quarantinedAd(t, cm, "bad")
		return !q
	})
}

// TestShadowExceptionsHoldJob runs a job on a node whose startd takes
// claims but whose activations, or the transfers of the job's input
// files, never get an answer (the connection drops): each attempt is a
// shadow exception, counted in NumShadowExceptions, and once there were
// more than MAX_SHADOW_EXCEPTIONS the job is held with a reason that says
// so.
func TestShadowExceptionsHoldJob(t *testing.T) {
	t.Parallel()
	for _, route := range []string{"/startd/activate", "/startd/transfer"} {
		t.Run(strings.TrimPrefix(route, "/startd/"), func(t *testing.T) { shadowExceptionsHoldJob(t, route) })
	}
}

func shadowExceptionsHoldJob(t *testing.T, route string) {
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD", "MAX_SHADOW_EXCEPTIONS": "1"})
	startNodeBehind(t, cm, "flaky", func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, route) {
			return false
		}
		// The node dies as it is asked to start the job, or to take its
		// input.
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return true
	})
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	cluster := submitFile(t, cm, jobDir, "executable = /bin/true\nlog = job.log\nqueue\n")
	var held wire.Job
	defer func() {
		if t.Failed() {
			jobs, _ := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{})
			for _, j := range jobs {
				t.Logf("job %s: %v", j.ID, j.Ad)
			}
			b, _ := os.ReadFile(filepath.Join(jobDir, "job.log"))
			t.Logf("log:\n%s", b)
		}
	}()
	testpool.Eventually(t, 60*time.Second, "the job to be held", func() bool {
		jobs, _ := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{Constraint: "JobStatus == 5"})
		if len(jobs) == 1 {
			held = jobs[0]
		}
		return len(jobs) == 1
	})
	if held.ID != fmt.Sprintf("%d.0", cluster) || held.Ad["NumShadowExceptions"] != "2" {
		t.Errorf("held job %s with NumShadowExceptions %s, want %d.0 with 2", held.ID, held.Ad["NumShadowExceptions"], cluster)
	}
	if r := held.Ad["HoldReason"]; !strings.Contains(r, "MAX_SHADOW_EXCEPTIONS (1)") {
		t.Errorf("HoldReason = %s", r)
	}
	n := 0
	for _, ev := range readJobLog(filepath.Join(jobDir, "job.log")) {
		if ev.Type == joblog.ShadowException {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d shadow exception events, want 2", n)
	}
}

// TestRetireBeforeEnd gives a node an end time at run time (a reconfig, as
// a glidein learns its own): a job whose declared runtime would not end
// before it never starts there, a job already running is vacated at the
// end and requeued with the reason (not held), and both complete on a
// node that joins later.
func TestRetireBeforeEnd(t *testing.T) {
	t.Parallel()
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	knobs := testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}
	ending := testpool.Start(t, "ending", "", "", nil, knobs)
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	script := "#!/bin/sh\ncase \"$PWD\" in *_ending_*) exec sleep 600;; esac\necho done\n"
	if err := os.WriteFile(filepath.Join(jobDir, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	running := submitFile(t, cm, jobDir, "executable = job.sh\noutput = running.out\nlog = running.log\nqueue\n")
	testpool.Eventually(t, 30*time.Second, "the first job to run", func() bool { return countJobs(t, cm, 2) == 1 })

	// The node learns it ends in 8 s, and takes no job within 4 s of it.
	end := time.Now().Add(8 * time.Second).Truncate(time.Second)
	cfg := testpool.Config(t, testpool.FastKnobs(), knobs, testpool.Knobs{
		startd.KnobEndTime: strconv.FormatInt(end.Unix(), 10), startd.KnobEndGrace: "4"})
	if err := ending.Master.Reconfig(cfg); err != nil {
		t.Fatal(err)
	}
	testpool.Eventually(t, 20*time.Second, "the end time in the node's ads", func() bool {
		for _, ad := range machineAds(t, cm, "ending") {
			if e, _ := ad.EvalAttr("PondEndTime").IntValue(); e == end.Unix() {
				return true
			}
		}
		return false
	})
	long := submitFile(t, cm, jobDir, "executable = job.sh\nallowed_job_duration = 3600\noutput = long.out\nlog = long.log\nqueue\n")

	testpool.Eventually(t, 30*time.Second, "the running job to be vacated at the end", func() bool {
		jobs, _ := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{Constraint: fmt.Sprintf("ClusterId == %d", running)})
		return len(jobs) == 1 && jobs[0].Ad["JobStatus"] == "1"
	})
	if early := time.Until(end); early > 500*time.Millisecond {
		t.Errorf("the job was vacated %v before the end", early)
	}
	jobs, _ := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{Constraint: fmt.Sprintf("ClusterId == %d", running)})
	if r := jobs[0].Ad["VacateReason"]; !strings.Contains(r, "end time") {
		t.Errorf("VacateReason = %s, want the end time", r)
	}
	testpool.Eventually(t, 10*time.Second, "the ended node's claims to go", func() bool {
		for _, ad := range machineAds(t, cm, "ending") {
			if st, _ := ad.EvalAttr("State").StringValue(); st == "Claimed" {
				return false
			}
		}
		return true
	})

	testpool.Start(t, "spare", "", "", nil, knobs)
	// A job's terminated event reaches its log before the job leaves the
	// queue for the history.
	testpool.Eventually(t, 60*time.Second, "both jobs to complete on the spare node and their logs to say so", func() bool {
		hist, _ := cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{})
		if len(hist) != 2 {
			return false
		}
		for _, log := range []string{"running.log", "long.log"} {
			ended := false
			for _, ev := range readJobLog(filepath.Join(jobDir, log)) {
				ended = ended || ev.Type == joblog.Terminated
			}
			if !ended {
				return false
			}
		}
		return true
	})
	hist, _ := cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{})
	for _, j := range hist {
		if !strings.Contains(j.Ad["LastRemoteHost"], "@spare") || j.Ad["ExitCode"] != "0" {
			t.Errorf("job %s ended on %s with exit code %s", j.ID, j.Ad["LastRemoteHost"], j.Ad["ExitCode"])
		}
	}
	for _, ev := range readJobLog(filepath.Join(jobDir, "long.log")) {
		if ev.Type == joblog.Execute && strings.Contains(ev.SlotName, "@ending") {
			t.Errorf("job %d, declared to run an hour, started on the ending node", long)
		}
	}
	var types []joblog.EventType
	for _, ev := range readJobLog(filepath.Join(jobDir, "running.log")) {
		if ev.Type != joblog.ImageSize {
			types = append(types, ev.Type)
		}
	}
	// Each run has its input transfer (started, finished) before its
	// execute event; the second its output transfer before it ends.
	ft := joblog.FileTransfer
	want := []joblog.EventType{joblog.Submit, ft, ft, joblog.Execute, joblog.Evicted, ft, ft, joblog.Execute, ft, ft, joblog.Terminated}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("running.log events %v, want %v", types, want)
	}
}

// TestMaxRetriesRequeuesFailedRuns checks max_retries as condor_submit
// writes it (OnExitRemove = NumJobCompletions > JobMaxRetries || ExitCode
// is 0): a run that fails goes back to the queue, a job leaves it once it
// succeeds or has failed more than max_retries times.
func TestMaxRetriesRequeuesFailedRuns(t *testing.T) {
	t.Parallel()
	// Five fast failures in a row would quarantine the node. The job
	// counts its runs in the host's /tmp, not a private one.
	cm, _ := pool(t, 1, testpool.Knobs{startd.KnobBlackholeFailures: "0", "MOUNT_UNDER_SCRATCH": ""})
	// The job, which may run as another user, counts its runs here.
	jobDir := sharedDir(t, "pond-retries-")
	script := "#!/bin/sh\necho run >> " + jobDir + "/runs\n[ $(wc -l < " + jobDir + "/runs) -ge 3 ] && exit 0\nexit 3\n"
	if err := os.WriteFile(filepath.Join(jobDir, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobDir, "runs"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(jobDir, "runs"), 0o666)
	third := submitFile(t, cm, jobDir, "executable = job.sh\nmax_retries = 5\nlog = third.log\nqueue\n")
	never := submitFile(t, cm, jobDir, "executable = /bin/false\nmax_retries = 1\nlog = never.log\nqueue\n")
	defer func() {
		if t.Failed() {
			jobs, _ := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{})
			for _, j := range jobs {
				t.Logf("job %s: status %s completions %s starts %s exit %s hold %s", j.ID, j.Ad["JobStatus"],
					j.Ad["NumJobCompletions"], j.Ad["NumJobStarts"], j.Ad["ExitCode"], j.Ad["HoldReason"])
			}
			b, _ := os.ReadFile(filepath.Join(jobDir, "third.log"))
			t.Logf("third.log:\n%s", b)
		}
	}()
	testpool.Eventually(t, 90*time.Second, "both jobs to leave the queue", func() bool {
		hist, _ := cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{})
		return len(hist) == 2
	})
	hist, _ := cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{})
	got := map[string]wire.Job{}
	for _, j := range hist {
		got[j.ID] = j
	}
	for _, tt := range []struct {
		cluster           int
		completions, code string
		log               string
	}{{third, "3", "0", "third.log"}, {never, "2", "1", "never.log"}} {
		j := got[fmt.Sprintf("%d.0", tt.cluster)]
		if j.Ad["NumJobCompletions"] != tt.completions || j.Ad["ExitCode"] != tt.code || j.Ad["NumJobStarts"] != tt.completions {
			t.Errorf("job %d: NumJobCompletions %s, NumJobStarts %s, ExitCode %s; want %s runs ending with %s",
				tt.cluster, j.Ad["NumJobCompletions"], j.Ad["NumJobStarts"], j.Ad["ExitCode"], tt.completions, tt.code)
		}
		n := map[joblog.EventType]int{}
		for _, ev := range readJobLog(filepath.Join(jobDir, tt.log)) {
			n[ev.Type]++
		}
		runs, _ := strconv.Atoi(tt.completions)
		if n[joblog.Execute] != runs || n[joblog.Evicted] != runs-1 || n[joblog.Terminated] != 1 {
			t.Errorf("%s: %d execute, %d evicted, %d terminated events; want %d, %d, 1", tt.log,
				n[joblog.Execute], n[joblog.Evicted], n[joblog.Terminated], runs, runs-1)
		}
	}
}

// TestRefusedInputCostsNothing runs a job on a node whose startd refuses
// the job's first input file (HTTP 409, as a machine that cannot write its
// scratch directory or retires does): the job goes back to the queue
// uncharged, with a shadow exception event that says the node refused it,
// and then runs to completion.
func TestRefusedInputCostsNothing(t *testing.T) {
	t.Parallel()
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD", "MAX_SHADOW_EXCEPTIONS": "0"})
	var refused atomic.Bool
	startNodeBehind(t, cm, "picky", func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/startd/transfer") && refused.CompareAndSwap(false, true) {
			wire.WriteError(w, http.StatusConflict, fmt.Errorf("the machine could not write the job's input"))
			return true
		}
		return false
	})
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	cluster := submitFile(t, cm, jobDir, "executable = /bin/true\nlog = job.log\nqueue\n")
	var done []wire.Job
	testpool.Eventually(t, 60*time.Second, "the job to complete", func() bool {
		done, _ = cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{Constraint: fmt.Sprintf("ClusterId == %d", cluster)})
		return len(done) == 1
	})
	if !refused.Load() {
		t.Fatal("no input transfer was refused")
	}
	if n := done[0].Ad["NumShadowExceptions"]; n != "" && n != "0" {
		t.Errorf("NumShadowExceptions = %s after a refusal, want none (MAX_SHADOW_EXCEPTIONS 0 would hold it)", n)
	}
	found := false
	for _, ev := range readJobLog(filepath.Join(jobDir, "job.log")) {
		if ev.Type == joblog.ShadowException && strings.Contains(ev.Message, "REFUSED") {
			found = true
		}
	}
	if !found {
		t.Error("no shadow exception event says the node refused the job")
	}
}

// startNodeBehind starts the startd node name of cm's pool behind a
// server that shows each request to intercept first and passes it on to
// the node unless intercept answered it (returned true). The node and the
// server stop with the test.
func startNodeBehind(t *testing.T, cm *testpool.Node, name string, intercept func(http.ResponseWriter, *http.Request) bool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	tok := testpool.Token(t, "node/"+name, auth.Daemon)
	m, err := daemon.Start(context.Background(), daemon.Options{
		Config: testpool.Config(t, testpool.FastKnobs(), testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}),
		Name:   name, Address: ln.Addr().String(), DataDir: dir, Verifier: testpool.Verifier(), Token: func() string { return tok }})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	h := m.Handler()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !intercept(w, r) {
			h.ServeHTTP(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		m.Stop(ctx)
		srv.Shutdown(ctx)
	})
}
