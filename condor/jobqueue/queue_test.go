package jobqueue

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/submit"
)

func openT(t testing.TB) *Queue {
	t.Helper()
	q, err := Open(context.Background(), filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func ads(n int, owner string) []Ad {
	out := make([]Ad, n)
	for i := range out {
		out[i] = Ad{"Owner": strconv.Quote(owner), "Cmd": `"/bin/true"`, "Args": strconv.Quote(fmt.Sprint(i)), "RequestMemory": "128", "JobUniverse": "5"}
	}
	return out
}

// expandFile expands a real submit file for a cluster, as condor_submit
// does.
func expandFile(t testing.TB, src string, cluster int) []Ad {
	t.Helper()
	f, err := submit.Parse("job.sub", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.Jobs(context.Background(), submit.Options{ClusterID: cluster, Owner: "alice", SubmitDir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func TestSubmitAndQuery(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	c1, err := q.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobs := expandFile(t, "executable = /bin/echo\narguments = $(Process)\noutput = out.$(Cluster).$(Process)\nqueue 3\n", c1)
	if _, err := q.SubmitCluster(ctx, c1, jobs, "file"); err != nil {
		t.Fatal(err)
	}
	c2, err := q.Submit(ctx, ads(1, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	if c1 != 1 || c2 != 2 {
		t.Fatalf("clusters %d, %d; want 1, 2", c1, c2)
	}
	j, err := q.Get(ctx, JobID{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ClusterId": "1", "ProcId": "2", "JobStatus": "1", "Args": `"2"`, "Out": `"out.1.2"`, "Cmd": `"/bin/echo"`, "Owner": `"alice"`}
	for k, w := range want {
		if j.Ad[k] != w {
			t.Errorf("%s = %q, want %q", k, j.Ad[k], w)
		}
	}
	if j.Status != Idle || j.Owner != "alice" {
		t.Errorf("job = %+v", j)
	}
	// Projection.
	got, err := q.Query(ctx, AllJobs(), []string{"ProcId", "args"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || len(got[1].Ad) != 2 || got[1].Ad["Args"] != `"1"` || got[3].Ad["Args"] != `"0"` {
		t.Errorf("projection = %+v", got)
	}
	// Selectors.
	tests := []struct {
		sel  Selector
		want []string
	}{
		{AllJobs(), []string{"1.0", "1.1", "1.2", "2.0"}},
		{ClusterJobs(1), []string{"1.0", "1.1", "1.2"}},
		{OneJob(JobID{1, 1}), []string{"1.1"}},
		{OwnerJobs("bob"), []string{"2.0"}},
		{Selector{All: true, Constraint: func(j Job) bool { return j.Ad["ProcId"] == "2" }}, []string{"1.2"}},
		{Selector{All: true, Constraint: func(j Job) bool { return j.Ad["Out"] == `"out.1.1"` }}, []string{"1.1"}},
		{Selector{Cluster: 9}, nil},
	}
	for _, tt := range tests {
		jobs, err := q.Query(ctx, tt.sel, []string{"ProcId"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID.String())
		}
		if !cmp.Equal(ids, tt.want) {
			t.Errorf("%s: %v, want %v", tt.sel, ids, tt.want)
		}
	}
	if _, err := q.Query(ctx, Selector{}, nil); err == nil {
		t.Errorf("empty selector accepted")
	}
	if _, err := q.Get(ctx, JobID{7, 0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get missing: %v", err)
	}
}

func TestSubmitValidation(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	if _, err := q.Submit(ctx, nil); err == nil {
		t.Errorf("empty submit accepted")
	}
	if _, err := q.Submit(ctx, []Ad{{"Cmd": `"x"`}}); err == nil || !strings.Contains(err.Error(), "has no Owner") {
		t.Errorf("ownerless job: %v", err)
	}
	// Failed submits leave nothing behind and do not consume ids visibly.
	c, err := q.Submit(ctx, ads(1, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if c != 1 {
		t.Errorf("cluster after failed submits = %d, want 1", c)
	}
	held := ads(1, "a")
	held[0]["JobStatus"] = "5"
	held[0]["HoldReason"] = `"submitted on hold"`
	c, err = q.Submit(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	j, err := q.Get(ctx, JobID{c, 0})
	if err != nil || j.Status != Held {
		t.Errorf("held submit: %+v, %v", j, err)
	}
}

// TestNewClusterAndSubmitCluster checks the two-step submit: reserved ids
// are never handed out twice (across a restart too), a reservation never
// committed stays empty, a commit needs a reservation and happens once, a
// retry of the same submission changes nothing, and a failed commit leaves
// the reservation usable.
func TestNewClusterAndSubmitCluster(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { q.Close() }()
	var reserved []int
	for range 2 {
		c, err := q.NewCluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reserved = append(reserved, c)
	}
	if c, err := q.Submit(ctx, ads(1, "a")); err != nil || c != 3 || !cmp.Equal(reserved, []int{1, 2}) {
		t.Fatalf("reserved %v, then Submit gave %d, %v; want [1 2] and 3", reserved, c, err)
	}
	for _, tt := range []struct {
		name       string
		cluster    int
		jobs       []Ad
		submission string
		wantErr    error
		wantMsg    string
	}{
		{"cluster never reserved", 9, ads(1, "a"), "s", ErrNoCluster, ""},
		{"cluster Submit committed", 3, ads(1, "a"), "s", ErrClusterCommitted, ""},
		{"no jobs", 2, nil, "s", nil, "submit of zero jobs"},
		{"job without an Owner", 2, []Ad{{"Cmd": `"x"`}}, "s", nil, "has no Owner"},
	} {
		_, err := q.SubmitCluster(ctx, tt.cluster, tt.jobs, tt.submission)
		if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("%s: err = %v, want %v %q", tt.name, err, tt.wantErr, tt.wantMsg)
		}
	}
	if retry, err := q.SubmitCluster(ctx, 2, ads(2, "b"), "first"); err != nil || retry {
		t.Fatalf("commit of reserved cluster 2 after failed commits: retry %v, %v", retry, err)
	}
	if retry, err := q.SubmitCluster(ctx, 2, ads(2, "b"), "first"); err != nil || !retry {
		t.Errorf("retry of the same submission: retry %v, %v; want a retry", retry, err)
	}
	for _, other := range []string{"second", ""} {
		if _, err := q.SubmitCluster(ctx, 2, ads(2, "b"), other); !errors.Is(err, ErrClusterCommitted) {
			t.Errorf("submission %q to committed cluster 2: %v, want ErrClusterCommitted", other, err)
		}
	}
	ids := func() []string {
		t.Helper()
		jobs, err := q.Query(ctx, AllJobs(), []string{"ProcId"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID.String())
		}
		return out
	}
	if got, want := ids(), []string{"2.0", "2.1", "3.0"}; !cmp.Equal(got, want) {
		t.Errorf("queue holds %v, want %v (reserved cluster 1 empty, cluster 2 once)", got, want)
	}

	// Reservations and commits survive a restart.
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if q, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	if c, err := q.NewCluster(ctx); err != nil || c != 4 {
		t.Errorf("NewCluster after a restart = %d, %v; want 4", c, err)
	}
	if retry, err := q.SubmitCluster(ctx, 2, ads(2, "b"), "first"); err != nil || !retry {
		t.Errorf("retry after a restart: retry %v, %v; want a retry", retry, err)
	}
	if retry, err := q.SubmitCluster(ctx, 1, ads(1, "c"), "late"); err != nil || retry {
		t.Errorf("commit of cluster 1 reserved before the restart: retry %v, %v", retry, err)
	}
	if got, want := ids(), []string{"1.0", "2.0", "2.1", "3.0"}; !cmp.Equal(got, want) {
		t.Errorf("queue holds %v after the restart, want %v", got, want)
	}
}

func TestTransitions(t *testing.T) {
	tests := []struct {
		name    string
		path    []Status
		wantErr string
	}{
		{"run and complete", []Status{Running, Completed}, ""},
		{"evict and rerun", []Status{Running, Idle, Running, Completed}, ""},
		{"suspend", []Status{Running, Suspended, Running, TransferringOutput, Completed}, ""},
		{"hold release", []Status{Held, Idle, Running, Held, Idle}, ""},
		{"remove idle", []Status{Removed}, ""},
		{"remove held", []Status{Held, Removed}, ""},
		{"idle to completed", []Status{Completed}, "job 1.0 cannot go from Idle to Completed"},
		{"held to running", []Status{Held, Running}, "cannot go from Held to Running"},
		{"already idle", []Status{Idle}, "job 1.0 is already Idle"},
		{"suspend idle", []Status{Suspended}, "cannot go from Idle to Suspended"},
		{"after completion", []Status{Running, Completed, Running}, "no such job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			q := openT(t)
			if _, err := q.Submit(ctx, ads(1, "alice")); err != nil {
				t.Fatal(err)
			}
			id := JobID{1, 0}
			var err error
			for _, s := range tt.path {
				if err = q.Transition(ctx, id, s, nil); err != nil {
					break
				}
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			var te *TransitionError
			if !errors.As(err, &te) && !errors.Is(err, ErrNotFound) {
				t.Errorf("error %T is neither TransitionError nor ErrNotFound", err)
			}
		})
	}
}

// TestRemoteHostOnlyWhileRunning checks that a job that stops running
// (evicted, held) has no RemoteHost, and keeps its LastRemoteHost, one at
// a time and in a batch (condor_hold of many).
func TestRemoteHostOnlyWhileRunning(t *testing.T) {
	ctx := context.Background()
	for _, to := range []Status{Idle, Held} {
		for _, batch := range []bool{false, true} {
			q := openT(t)
			if _, err := q.Submit(ctx, ads(2, "alice")); err != nil {
				t.Fatal(err)
			}
			where := Ad{"RemoteHost": `"slot1@node"`, "LastRemoteHost": `"slot1@node"`}
			for p := range 2 {
				if err := q.Transition(ctx, JobID{1, p}, Running, where); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			switch {
			case batch && to == Held:
				_, err = q.Hold(ctx, ClusterJobs(1), "held", 1, 0)
			default:
				for p := range 2 {
					if err = q.Transition(ctx, JobID{1, p}, to, nil); err != nil {
						break
					}
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			for p := range 2 {
				j, err := q.Get(ctx, JobID{1, p})
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := j.Ad["RemoteHost"]; ok || j.Ad["LastRemoteHost"] != `"slot1@node"` {
					t.Errorf("to %v (batch %v): RemoteHost %q, LastRemoteHost %q: want none and the slot", to, batch, j.Ad["RemoteHost"], j.Ad["LastRemoteHost"])
				}
			}
		}
	}
}

func TestLifecycleAttributes(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(1_800_000_000, 0)
	q, err := OpenWith(ctx, filepath.Join(t.TempDir(), "q.db"), Options{Synchronous: "FULL", Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Submit(ctx, ads(2, "alice")); err != nil {
		t.Fatal(err)
	}
	id := JobID{1, 1}
	step := func(to Status, attrs Ad) {
		t.Helper()
		clock = clock.Add(10 * time.Second)
		if err := q.Transition(ctx, id, to, attrs); err != nil {
			t.Fatal(err)
		}
	}
	step(Running, Ad{"RemoteHost": `"slot1@node1"`})
	step(Idle, nil)
	step(Running, Ad{"RemoteHost": `"slot1@node1"`})
	j, _ := q.Get(ctx, id)
	for k, w := range map[string]string{"NumJobStarts": "2", "JobRunCount": "2", "JobStartDate": "1800000010", "JobCurrentStartDate": "1800000030",
		"EnteredCurrentStatus": "1800000030", "LastJobStatus": "1", "JobStatus": "2", "RemoteHost": `"slot1@node1"`} {
		if j.Ad[k] != w {
			t.Errorf("%s = %q, want %q", k, j.Ad[k], w)
		}
	}
	if _, err := q.Hold(ctx, OneJob(id), "disk full", 13, 2); err != nil {
		t.Fatal(err)
	}
	j, _ = q.Get(ctx, id)
	if j.Ad["HoldReason"] != `"disk full"` || j.Ad["HoldReasonCode"] != "13" || j.Ad["NumHolds"] != "1" || j.Status != Held {
		t.Errorf("held ad: %v", j.Ad)
	}
	if ch, err := q.Release(ctx, ClusterJobs(1), "fixed"); err != nil || len(ch) != 1 || ch[0].From != Held {
		t.Fatalf("release: %v, %v", ch, err)
	}
	j, _ = q.Get(ctx, id)
	if _, ok := j.Ad["HoldReason"]; ok || j.Ad["LastHoldReason"] != `"disk full"` || j.Ad["LastHoldReasonCode"] != "13" || j.Ad["ReleaseReason"] != `"fixed"` {
		t.Errorf("released ad: %v", j.Ad)
	}
	if err := q.SetAttrs(ctx, id, Ad{"ImageSize": "1000", "MyAttr": `"x"`}); err != nil {
		t.Fatal(err)
	}
	if err := q.SetAttrs(ctx, id, Ad{"JobStatus": "4"}); err == nil {
		t.Errorf("SetAttrs JobStatus accepted")
	}
	if err := q.SetAttrs(ctx, JobID{9, 9}, Ad{"A": "1"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetAttrs missing job: %v", err)
	}
	step(Running, nil)
	step(Completed, Ad{"ExitCode": "0", "ExitBySignal": "false"})
	// Job 1.0 removed while idle.
	if ch, err := q.Remove(ctx, OneJob(JobID{1, 0}), "via condor_rm"); err != nil || len(ch) != 1 {
		t.Fatal(ch, err)
	}
	if n, _ := q.Counts(ctx); len(n) != 0 {
		t.Errorf("queue not empty: %v", n)
	}
	var left int
	if err := q.r.QueryRow(`SELECT COUNT(*) FROM cluster_attrs`).Scan(&left); err != nil || left != 0 {
		t.Errorf("cluster ad left behind: %d rows, %v", left, err)
	}
	h, err := q.History(ctx, HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].ID != (JobID{1, 0}) || h[0].Status != Removed || h[1].Status != Completed {
		t.Fatalf("history = %+v", h)
	}
	if h[1].Ad["ExitCode"] != "0" || h[1].Ad["CompletionDate"] == "" || h[1].Ad["ImageSize"] != "1000" || h[1].Ad["Cmd"] != `"/bin/true"` {
		t.Errorf("history ad: %v", h[1].Ad)
	}
	if h[0].Ad["RemoveReason"] != `"via condor_rm"` {
		t.Errorf("removed ad: %v", h[0].Ad)
	}
	h, _ = q.History(ctx, HistoryQuery{Limit: 1, Oldest: true, Attrs: []string{"ExitCode"}})
	if len(h) != 1 || h[0].ID != (JobID{1, 1}) || len(h[0].Ad) != 1 {
		t.Errorf("oldest history = %+v", h)
	}
	h, _ = q.History(ctx, HistoryQuery{Sel: OwnerJobs("nobody")})
	if len(h) != 0 {
		t.Errorf("history of nobody = %+v", h)
	}
}

func TestActions(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	if _, err := q.Submit(ctx, ads(3, "alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(ctx, ads(2, "bob")); err != nil {
		t.Fatal(err)
	}
	if err := q.Transition(ctx, JobID{1, 0}, Running, nil); err != nil {
		t.Fatal(err)
	}
	ch, err := q.Hold(ctx, OwnerJobs("alice"), "user hold", 1, 0)
	if err != nil || len(ch) != 3 || ch[0].From != Running {
		t.Fatalf("hold alice: %v, %v", ch, err)
	}
	ch, err = q.Hold(ctx, OwnerJobs("alice"), "again", 1, 0)
	if err != nil || len(ch) != 0 {
		t.Errorf("hold again changed %v, %v", ch, err)
	}
	if _, err := q.Remove(ctx, OwnerJobs("carol"), "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("remove carol: %v", err)
	}
	idle, err := q.Idle(ctx)
	if err != nil || len(idle) != 2 || idle[0].ID != (JobID{2, 0}) || idle[0].Ad["Cmd"] != `"/bin/true"` {
		t.Errorf("idle = %+v, %v", idle, err)
	}
	ch, err = q.Remove(ctx, AllJobs(), "cleanup")
	if err != nil || len(ch) != 5 {
		t.Errorf("remove all: %v, %v", ch, err)
	}
	if err := q.Apply(ctx, []Change{{ID: JobID{1, 0}, To: Idle}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("apply on removed: %v", err)
	}
	sel, err := ParseSelector("12.3")
	if err != nil || sel.Cluster != 12 || !sel.HasProc || sel.Proc != 3 {
		t.Errorf("ParseSelector = %+v, %v", sel, err)
	}
	for _, bad := range []string{"", "1.x", "0", "a b"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) accepted", bad)
		}
	}
}

func TestApplyAtomic(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	if _, err := q.Submit(ctx, ads(2, "a")); err != nil {
		t.Fatal(err)
	}
	err := q.Apply(ctx, []Change{{ID: JobID{1, 0}, To: Running}, {ID: JobID{1, 1}, To: Completed}})
	var te *TransitionError
	if !errors.As(err, &te) || te.ID != (JobID{1, 1}) {
		t.Fatalf("err = %v", err)
	}
	j, _ := q.Get(ctx, JobID{1, 0})
	if j.Status != Idle {
		t.Errorf("failed batch left job 1.0 %s", j.Status)
	}
}

func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	const workers, each = 4, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	clusters := make(chan int, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				c, err := q.Submit(ctx, ads(3, fmt.Sprint("u", w)))
				if err != nil {
					errs <- err
					return
				}
				clusters <- c
				for p := 0; p < 3; p++ {
					for _, s := range []Status{Running, Completed} {
						if err := q.Transition(ctx, JobID{c, p}, s, nil); err != nil {
							errs <- err
							return
						}
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := q.Query(ctx, AllJobs(), nil); err != nil {
					errs <- err
					return
				}
				if _, err := q.History(ctx, HistoryQuery{Limit: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(clusters)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for c := range clusters {
		if seen[c] {
			t.Fatalf("cluster %d allocated twice", c)
		}
		seen[c] = true
	}
	h, err := q.History(ctx, HistoryQuery{})
	if err != nil || len(h) != workers*each*3 {
		t.Fatalf("history has %d jobs (%v), want %d", len(h), err, workers*each*3)
	}
}

const childEnv = "POND_JOBQUEUE_KILL_CHILD"

// TestMain lets the test binary act as a submitting child for the kill -9 test.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(runChild(path))
	}
	os.Exit(m.Run())
}

// runChild submits clusters forever, printing each id after Submit returns.
func runChild(path string) int {
	ctx := context.Background()
	q, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; ; i++ {
		n := 1 + i%50
		jobs := ads(n, "killtest")
		for _, j := range jobs {
			j["ClusterSize"] = strconv.Itoa(n)
		}
		c, err := q.Submit(ctx, jobs)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%d %d\n", c, n)
	}
}

func TestSubmitSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "queue.db")
	reported := map[int]int{}
	for round := 0; round < 4; round++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		want := 5 + round*7
		for i := 0; i < want && sc.Scan(); i++ {
			var c, n int
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &c, &n); err != nil {
				t.Fatalf("child said %q", sc.Text())
			}
			reported[c] = n
		}
		// Kill right after the last reported Submit returned.
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if len(reported) == 0 {
			t.Fatalf("child reported nothing; stderr: %s", stderr.String())
		}
	}
	q, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	jobs, err := q.Query(context.Background(), OwnerJobs("killtest"), []string{"ClusterSize"})
	if err != nil {
		t.Fatal(err)
	}
	have, size := map[int]int{}, map[int]int{}
	for _, j := range jobs {
		have[j.ID.Cluster]++
		size[j.ID.Cluster], _ = strconv.Atoi(j.Ad["ClusterSize"])
	}
	for c, n := range reported {
		if have[c] != n {
			t.Errorf("cluster %d: %d jobs after kill -9, %d were submitted", c, have[c], n)
		}
	}
	// A cluster committed but not yet reported may exist too, but whole.
	for c, n := range have {
		if n != size[c] {
			t.Errorf("cluster %d is partial: %d of %d jobs", c, n, size[c])
		}
	}
}

func TestPruneHistory(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	if _, err := q.Submit(ctx, ads(5, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Remove(ctx, AllJobs(), "done"); err != nil {
		t.Fatal(err)
	}
	n, err := q.PruneHistory(ctx, 2)
	if err != nil || n != 3 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	h, err := q.History(ctx, HistoryQuery{Oldest: true})
	if err != nil || len(h) != 2 || h[0].ID != (JobID{1, 3}) || h[1].ID != (JobID{1, 4}) {
		t.Errorf("history after prune = %+v, %v", h, err)
	}
	if _, err := q.PruneHistory(ctx, -1); err == nil {
		t.Errorf("negative keep accepted")
	}
}

func TestOpenPaths(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	odd := filepath.Join(dir, "with space #1 ?x%20.db")
	q, err := Open(ctx, odd)
	if err != nil {
		t.Fatalf("open %q: %v", odd, err)
	}
	if _, err := q.Submit(ctx, ads(1, "a")); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if _, err := os.Stat(odd); err != nil {
		t.Errorf("database not at %q: %v", odd, err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, garbage); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("garbage database: %v", err)
	}
	if _, err := OpenWith(ctx, filepath.Join(dir, "x.db"), Options{Synchronous: "SOMETIMES"}); err == nil {
		t.Errorf("bad synchronous accepted")
	}
}

// TestPruneHistoryBytes bounds the history by the bytes of its ads: it
// keeps the most recently finished jobs whose ads fit, deletes the rest
// (in several transactions when they are many), and leaves the queue be.
func TestPruneHistoryBytes(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	const jobs = 2*historyPruneBatch + 10
	if _, err := q.Submit(ctx, ads(jobs, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Remove(ctx, AllJobs(), "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(ctx, ads(3, "b")); err != nil {
		t.Fatal(err)
	}
	rows, all, err := q.HistoryBytes(ctx)
	if err != nil || rows != jobs {
		t.Fatalf("history of %d rows, %d bytes, %v", rows, all, err)
	}
	per := all / rows
	tests := []struct {
		name     string
		maxBytes int64
		keep     int64
	}{
		{"all fit", all, jobs},
		{"all but the oldest", all - 1, jobs - 1},
		{"ten", 10*per + per/2, 10},
		{"one", per + per/2, 1},
		{"none", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _, _ := q.HistoryBytes(ctx)
			n, err := q.PruneHistoryBytes(ctx, tt.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			rows, bytes, err := q.HistoryBytes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(before, tt.keep); rows != want || int64(n) != before-want {
				t.Errorf("pruned %d, %d rows left (%d bytes); want %d left", n, rows, bytes, want)
			}
			if bytes > tt.maxBytes {
				t.Errorf("%d bytes left, over %d", bytes, tt.maxBytes)
			}
			h, err := q.History(ctx, HistoryQuery{})
			if err != nil {
				t.Fatal(err)
			}
			// The most recently finished are kept: the jobs removed
			// last, the highest procs.
			for i, j := range h {
				if want := (JobID{1, jobs - 1 - i}); j.ID != want {
					t.Fatalf("history[%d] = %s, want %s", i, j.ID, want)
				}
			}
		})
	}
	if got, err := q.Query(ctx, AllJobs(), nil); err != nil || len(got) != 3 {
		t.Errorf("queue after pruning: %d jobs, %v", len(got), err)
	}
	if _, err := q.PruneHistoryBytes(ctx, -1); err == nil {
		t.Errorf("a negative bound accepted")
	}
}

// TestHistorySizesOfAnOlderQueue opens a queue whose history was kept
// before the sizes of its ads were: they are measured once, at open.
func TestHistorySizesOfAnOlderQueue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(ctx, ads(7, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Remove(ctx, AllJobs(), "done"); err != nil {
		t.Fatal(err)
	}
	_, want, err := q.HistoryBytes(ctx)
	if err != nil || want == 0 {
		t.Fatalf("history of %d bytes, %v", want, err)
	}
	q.Close()
	db, err := sql.Open("sqlite", dsn(path, "NORMAL", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TRIGGER history_size_in; DROP TRIGGER history_size_out; DROP TABLE history_sizes`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if q, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rows, got, err := q.HistoryBytes(ctx)
	if err != nil || rows != 7 || got != want {
		t.Errorf("reopened: %d rows of %d bytes, %v; want 7 of %d", rows, got, err, want)
	}
}

// TestScanHistoryPages reads a history of several pages: every job once,
// in order either way, a limit, a constraint that the full ad meets
// before the projection, and an error of the reader ending the scan.
func TestScanHistoryPages(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	const jobs = 2*historyPage + 200
	if _, err := q.Submit(ctx, ads(jobs, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Remove(ctx, AllJobs(), "done"); err != nil {
		t.Fatal(err)
	}
	even := func(j Job) bool { return j.ID.Proc%2 == 0 && j.Ad["Owner"] != "" }
	tests := []struct {
		name  string
		hq    HistoryQuery
		procs func(i int) int // the proc of the i-th job read
		n     int
	}{
		{"all, newest first", HistoryQuery{}, func(i int) int { return jobs - 1 - i }, jobs},
		{"all, oldest first", HistoryQuery{Oldest: true}, func(i int) int { return i }, jobs},
		{"a limit over a page", HistoryQuery{Limit: historyPage + 7}, func(i int) int { return jobs - 1 - i }, historyPage + 7},
		{"a constraint and a projection", HistoryQuery{Sel: Selector{All: true, Constraint: even}, Attrs: []string{"ProcId"}},
			func(i int) int { return jobs - 2 - 2*i }, jobs / 2},
		{"a constraint and a limit", HistoryQuery{Sel: Selector{All: true, Constraint: even}, Limit: 300, Oldest: true},
			func(i int) int { return 2 * i }, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			err := q.ScanHistory(ctx, tt.hq, func(j Job) error {
				if want := tt.procs(i); j.ID.Proc != want {
					return fmt.Errorf("job %d read is %s, want proc %d", i, j.ID, want)
				}
				if tt.hq.Attrs != nil && len(j.Ad) != len(tt.hq.Attrs) {
					return fmt.Errorf("job %s has %d attributes, want the %d projected", j.ID, len(j.Ad), len(tt.hq.Attrs))
				}
				i++
				return nil
			})
			if err != nil || i != tt.n {
				t.Errorf("read %d jobs, want %d: %v", i, tt.n, err)
			}
		})
	}
	stop := errors.New("enough")
	n := 0
	if err := q.ScanHistory(ctx, HistoryQuery{}, func(Job) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("a reader's error: %v after %d jobs", err, n)
	}
}
