package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/wire"
)

// startFlockNode starts a one-node pool (its own central manager) named
// name with cpus slots, whose schedd flocks to the targets targets holds.
func startFlockNode(t *testing.T, name, daemons string, cpus string, targets *atomic.Pointer[[]schedd.FlockTarget]) *testpool.Node {
	t.Helper()
	cfg := testpool.Config(t, testpool.FastKnobs(), testpool.Knobs{"DAEMON_LIST": daemons, "NUM_CPUS": cpus, "FLOCK_IDLE_TIME": "1"})
	n, err := testpool.StartWith(name, "", "", nil, cfg, func(o *daemon.Options) {
		if targets != nil {
			o.FlockTargets = func() []schedd.FlockTarget {
				if p := targets.Load(); p != nil {
					return *p
				}
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// TestScheddFlocks runs more jobs than a one-slot pool takes: the schedd
// flocks the jobs idle for FLOCK_IDLE_TIME to the willing pool, whose
// negotiator matches them and whose startd the schedd claims; each job
// runs once, its ad says where (RemoteHost, PondFlockedTo). Once the pool
// is no longer willing, the jobs running there finish, its negotiator gets
// no more jobs, and new jobs run at home.
func TestScheddFlocks(t *testing.T) {
	t.Parallel()
	spare := startFlockNode(t, "spare-0", "MASTER, COLLECTOR, NEGOTIATOR, STARTD", "4", nil)
	var targets atomic.Pointer[[]schedd.FlockTarget]
	targets.Store(&[]schedd.FlockTarget{{Pool: "spare", Node: "spare-0", Collector: spare.Addr, IdleSlots: 4}})
	busy := startFlockNode(t, "busy-0", "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD", "1", &targets)

	dir := t.TempDir()
	submitFile(t, busy, dir, `
executable = /bin/sleep
arguments = 4
log = job.log
request_cpus = 1
request_memory = 16
queue 6
`)
	ctx := context.Background()
	testpool.Eventually(t, 60*time.Second, "a job running in the spare pool", func() bool {
		jobs, err := busy.Client().Schedd().Queue(ctx, &wire.QueryJobsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if strings.Contains(j.Ad["RemoteHost"], "@spare-0") && j.Ad["JobStatus"] == "2" {
				return true
			}
		}
		return false
	})
	// The spare pool is no longer willing: what runs there finishes.
	targets.Store(nil)
	waitDone(t, busy, 2*time.Minute)

	hist, err := busy.Client().Schedd().History(ctx, &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	flocked := 0
	for _, j := range hist {
		host := j.Ad["RemoteHost"]
		switch {
		case regexp.MustCompile(`^"slot\d+(_\d+)?@spare-0"$`).MatchString(host):
			flocked++
			if j.Ad[schedd.AttrFlockedTo] != `"spare"` || j.Ad[schedd.AttrLastRemotePool] != `"spare"` {
				t.Errorf("job %s ran in spare: PondFlockedTo %s LastRemotePool %s", j.ID, j.Ad[schedd.AttrFlockedTo], j.Ad[schedd.AttrLastRemotePool])
			}
		case strings.HasSuffix(host, `@busy-0"`):
			if _, ok := j.Ad[schedd.AttrFlockedTo]; ok {
				t.Errorf("job %s ran at home but has PondFlockedTo %s", j.ID, j.Ad[schedd.AttrFlockedTo])
			}
		default:
			t.Errorf("job %s: RemoteHost %s", j.ID, host)
		}
	}
	if len(hist) != 6 || flocked == 0 {
		t.Fatalf("%d jobs in the history, %d of them flocked; want 6, some flocked", len(hist), flocked)
	}
	// Each job ran once: one execute and one termination event each.
	logText, err := os.ReadFile(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"001", "005"} {
		ids := regexp.MustCompile(`(?m)^`+ev+` \((\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(string(logText), -1)
		seen := map[string]int{}
		for _, m := range ids {
			seen[m[1]]++
		}
		if len(ids) != 6 || len(seen) != 6 {
			t.Errorf("job log: %d %s events for %d jobs, want one for each of 6:\n%s", len(ids), ev, len(seen), logText)
		}
	}

	// No longer flocked: the spare pool's negotiator gets no job, and
	// the schedd withdrew its submitters from the spare collector.
	testpool.Eventually(t, 20*time.Second, "the submitters withdrawn from the spare pool", func() bool {
		ads, err := spare.Client().Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeSubmitter})
		return err == nil && len(ads) == 0
	})
	submitFile(t, busy, dir, `
executable = /bin/sleep
arguments = 2
request_cpus = 1
request_memory = 16
queue 3
`)
	asSpare := wire.NewClient(busy.Addr, testpool.Token(t, "node/spare-0", auth.Daemon)).Schedd()
	idle, err := asSpare.Idle(ctx, &wire.IdleRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(idle) != 0 {
		t.Errorf("the negotiator of a pool no longer flocked to got %d idle jobs", len(idle))
	}
	asOwn := wire.NewClient(busy.Addr, testpool.Token(t, "node/busy-0", auth.Daemon)).Schedd()
	if idle, err := asOwn.Idle(ctx, &wire.IdleRequest{}); err != nil || len(idle) == 0 {
		t.Errorf("the pool's own negotiator got %d idle jobs, %v", len(idle), err)
	}
	waitDone(t, busy, 2*time.Minute)
	hist, err = busy.Client().Schedd().History(ctx, &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range hist {
		if strings.HasPrefix(j.ID, "2.") && !strings.HasSuffix(j.Ad["RemoteHost"], `@busy-0"`) {
			t.Errorf("job %s ran on %s after flocking stopped", j.ID, j.Ad["RemoteHost"])
		}
	}
}

// TestScheddFlockJobRequirements flocks only the jobs a flock's job
// requirements let go, within its max_jobs (one at a time).
func TestScheddFlockJobRequirements(t *testing.T) {
	t.Parallel()
	spare := startFlockNode(t, "spare-0", "MASTER, COLLECTOR, NEGOTIATOR, STARTD", "4", nil)
	var targets atomic.Pointer[[]schedd.FlockTarget]
	targets.Store(&[]schedd.FlockTarget{{Pool: "spare", Node: "spare-0", Collector: spare.Addr,
		JobRequirements: []string{"WantFlocking =?= true"}, MaxJobs: 1, IdleSlots: 4}})
	busy := startFlockNode(t, "busy-0", "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD", "1", &targets)
	dir := t.TempDir()
	submitFile(t, busy, dir, `
executable = /bin/sleep
arguments = 3
request_cpus = 1
request_memory = 16
queue 2
+WantFlocking = true
queue 2
`)
	// max_jobs 1: never two jobs in spare at once.
	most := 0
	testpool.Eventually(t, 2*time.Minute, "the queue to drain", func() bool {
		jobs, err := busy.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, j := range jobs {
			if strings.Contains(j.Ad["RemoteHost"], "@spare-0") && j.Ad["JobStatus"] == "2" {
				n++
			}
		}
		most = max(most, n)
		return len(jobs) == 0
	})
	if most > 1 {
		t.Errorf("%d jobs ran in spare at once, more than max_jobs 1", most)
	}
	hist, err := busy.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	flocked := 0
	for _, j := range hist {
		if strings.Contains(j.Ad["RemoteHost"], "@spare-0") {
			flocked++
			if j.Ad["WantFlocking"] != "true" {
				t.Errorf("job %s without WantFlocking ran in spare", j.ID)
			}
		}
	}
	if flocked == 0 {
		t.Error("no job with WantFlocking flocked")
	}
}

// TestScheddFlocksOnlyToIdleSlots gives the schedd a pool it may flock to
// but that announced no idle slot: the schedd does not add it.
func TestScheddFlocksOnlyToIdleSlots(t *testing.T) {
	t.Parallel()
	spare := startFlockNode(t, "spare-0", "MASTER, COLLECTOR, NEGOTIATOR, STARTD", "4", nil)
	var targets atomic.Pointer[[]schedd.FlockTarget]
	targets.Store(&[]schedd.FlockTarget{{Pool: "spare", Node: "spare-0", Collector: spare.Addr, IdleSlots: 0}})
	busy := startFlockNode(t, "busy-0", "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD", "1", &targets)
	submitFile(t, busy, t.TempDir(), `
executable = /bin/sleep
arguments = 3
request_cpus = 1
request_memory = 16
queue 3
`)
	ctx := context.Background()
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		ads, err := spare.Client().Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeSubmitter})
		if err != nil {
			t.Fatal(err)
		}
		if len(ads) != 0 {
			t.Fatalf("the schedd advertised to a pool with no idle slot: %v", ads)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitDone(t, busy, time.Minute)
}

// TestScheddFlocksNearestFirst gives the schedd two pools, the near one
// first, with too few slots for the jobs: it flocks to the near pool
// first (the first execute event away from home is there), and adds the
// far one FLOCK_IDLE_TIME later as jobs still wait (FLOCK_INCREMENT 1).
func TestScheddFlocksNearestFirst(t *testing.T) {
	t.Parallel()
	near := startFlockNode(t, "near-0", "MASTER, COLLECTOR, NEGOTIATOR, STARTD", "2", nil)
	far := startFlockNode(t, "far-0", "MASTER, COLLECTOR, NEGOTIATOR, STARTD", "4", nil)
	var targets atomic.Pointer[[]schedd.FlockTarget]
	targets.Store(&[]schedd.FlockTarget{
		{Pool: "near", Node: "near-0", Collector: near.Addr, IdleSlots: 2},
		{Pool: "far", Node: "far-0", Collector: far.Addr, IdleSlots: 4}})
	busy := startFlockNode(t, "busy-0", "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD", "1", &targets)
	dir := t.TempDir()
	submitFile(t, busy, dir, `
executable = /bin/sleep
arguments = 5
log = job.log
request_cpus = 1
request_memory = 16
queue 10
`)
	waitDone(t, busy, 2*time.Minute)
	logText, err := os.ReadFile(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, m := range regexp.MustCompile(`(?m)^001 .* Job executing on host: <([^>]*)>`).FindAllStringSubmatch(string(logText), -1) {
		if m[1] != busy.Addr {
			hosts = append(hosts, m[1])
		}
	}
	if len(hosts) == 0 || hosts[0] != near.Addr {
		t.Fatalf("executions away from home %v: want the near pool (%s) first", hosts, near.Addr)
	}
	if !slices.Contains(hosts, far.Addr) {
		t.Errorf("the far pool (%s) was never added: %v", far.Addr, hosts)
	}
}

// TestScheddFlockFollowsTheNewManager flocks to pool spare, whose central
// manager then changes (a replica takes over: the pool's target names
// another node and collector, which announces no idle slot yet): the
// schedd keeps flocking to the pool at its new manager, withdraws its
// submitters from the old one, whose negotiator gets no more jobs, and
// every job runs once.
func TestScheddFlockFollowsTheNewManager(t *testing.T) {
	t.Parallel()
	old := startFlockNode(t, "spare-0", "MASTER, COLLECTOR, NEGOTIATOR, STARTD", "2", nil)
	acting := startFlockNode(t, "spare-1", "MASTER, COLLECTOR, NEGOTIATOR, STARTD", "4", nil)
	var targets atomic.Pointer[[]schedd.FlockTarget]
	targets.Store(&[]schedd.FlockTarget{{Pool: "spare", Node: "spare-0", Collector: old.Addr, IdleSlots: 2}})
	busy := startFlockNode(t, "busy-0", "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD", "1", &targets)
	dir := t.TempDir()
	submitFile(t, busy, dir, `
executable = /bin/sleep
arguments = 3
log = job.log
request_cpus = 1
request_memory = 16
queue 8
`)
	ctx := context.Background()
	testpool.Eventually(t, 60*time.Second, "a job running at spare-0", func() bool {
		jobs, err := busy.Client().Schedd().Queue(ctx, &wire.QueryJobsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if strings.Contains(j.Ad["RemoteHost"], "@spare-0") && j.Ad["JobStatus"] == "2" {
				return true
			}
		}
		return false
	})
	targets.Store(&[]schedd.FlockTarget{{Pool: "spare", Node: "spare-1", Collector: acting.Addr, IdleSlots: 0}})
	testpool.Eventually(t, 20*time.Second, "the submitters withdrawn from spare-0's collector", func() bool {
		ads, err := old.Client().Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeSubmitter})
		return err == nil && len(ads) == 0
	})
	asOld := wire.NewClient(busy.Addr, testpool.Token(t, "node/spare-0", auth.Daemon)).Schedd()
	if idle, err := asOld.Idle(ctx, &wire.IdleRequest{}); err != nil || len(idle) != 0 {
		t.Errorf("the old manager's negotiator got %d idle jobs (%v)", len(idle), err)
	}
	waitDone(t, busy, 2*time.Minute)
	hist, err := busy.Client().Schedd().History(ctx, &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	atNew := 0
	for _, j := range hist {
		if strings.Contains(j.Ad["RemoteHost"], "@spare-1") {
			atNew++
			if j.Ad[schedd.AttrFlockedTo] != `"spare"` {
				t.Errorf("job %s ran at spare-1 with PondFlockedTo %s", j.ID, j.Ad[schedd.AttrFlockedTo])
			}
		}
	}
	if len(hist) != 8 || atNew == 0 {
		t.Fatalf("%d jobs done, %d of them at the new manager's pool; want 8, some there", len(hist), atNew)
	}
	logText, err := os.ReadFile(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^005 \((\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(string(logText), -1) {
		seen[m[1]]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %s terminated %d times", id, n)
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d jobs terminated, want 8", len(seen))
	}
}

// TestFlockedClaimsFenced flocks a job to a pool whose startd follows
// epoch 2 while the negotiator the schedd flocks to is of epoch 1 (a
// manager a replica replaced): the flocked match carries its epoch through
// the schedd to the startd, which refuses the claim, so the job does not
// run; once that negotiator is of epoch 2, the flocked job runs there.
func TestFlockedClaimsFenced(t *testing.T) {
	t.Parallel()
	spareCM := testpool.Start(t, "spare-0", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR", wire.EpochKnob: "1"})
	exec := testpool.Start(t, "spare-1", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": spareCM.Addr,
		"NUM_CPUS": "2", wire.EpochKnob: "2"})
	var targets atomic.Pointer[[]schedd.FlockTarget]
	targets.Store(&[]schedd.FlockTarget{{Pool: "spare", Node: "spare-0", Collector: spareCM.Addr, IdleSlots: 2}})
	busy := startFlockNode(t, "busy-0", "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD", "1", &targets)
	submitFile(t, busy, t.TempDir(), `
executable = /bin/sleep
arguments = 1
request_cpus = 1
request_memory = 16
queue
`)
	testpool.Eventually(t, 30*time.Second, "a flocked match by the negotiator of epoch 1", func() bool {
		return spareCM.Master.Negotiator().LastCycle().Matches > 0
	})
	time.Sleep(2 * time.Second)
	ctx := context.Background()
	jobs, err := busy.Client().Schedd().Queue(ctx, &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Ad["JobStatus"] != "1" {
		t.Fatalf("a flocked job ran on a startd of epoch 2 matched by a negotiator of epoch 1: %v", jobs)
	}
	if err := spareCM.Master.Reconfig(testpool.Config(t, testpool.FastKnobs(),
		testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR", wire.EpochKnob: "2"})); err != nil {
		t.Fatal(err)
	}
	waitDone(t, busy, time.Minute)
	hist, err := busy.Client().Schedd().History(ctx, &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || !strings.Contains(hist[0].Ad["RemoteHost"], "@spare-1") || hist[0].Ad[schedd.AttrFlockedTo] != `"spare"` {
		t.Fatalf("history %v, want the job run at spare-1, flocked", hist)
	}
	if e := exec.Master.Startd().Epoch(); e != 2 {
		t.Errorf("the startd's epoch is %d, want 2", e)
	}
}
