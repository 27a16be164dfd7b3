package factory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/glidein/ssh"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// The test binary doubles as pondctl: `TEST agent ARGS` runs an agent (a
// glidein the factory started), and with childEnv set it runs a factory
// until it is killed.
const childEnv = "POND_FACTORY_TEST_CHILD"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" && slices.Contains(os.Args, sleeperArg) {
		// A glidein of TestAgentKilled: it only sleeps.
		time.Sleep(2 * time.Minute)
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := agent.Main(ctx, os.Args[2:], os.Stdout, os.Stderr, agent.Logging{})
		stop()
		os.Exit(code)
	}
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild(os.Getenv(childEnv)))
	}
	// The tests that start moto run in parallel: they cannot set its
	// environment themselves (ec2test.StartMoto finds it set).
	for k, v := range ec2test.Env() {
		os.Setenv(k, v)
	}
	code := m.Run()
	// One Slurm cluster serves the package's tests.
	slurmtest.StopShared()
	os.Exit(code)
}

// fastCondor writes a configuration of quick negotiation and reports,
// with extra lines, and returns its path.
func fastCondor(t testing.TB, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "condor_config")
	text := "NEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 0\nUPDATE_INTERVAL = 1\nSTARTER_POLL_INTERVAL = 0.1s\n" + extra
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startCM runs, in this process, the central manager of pool campus,
// without a startd: jobs run only on glideins.
func startCM(t testing.TB) *agent.Agent {
	t.Helper()
	cfg := &agent.Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0", API: "127.0.0.1:0",
		GossipProfile: "fast", DataDir: t.TempDir(), InsecureAPI: true,
		ConfigFile: fastCondor(t, "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n")}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// submitJobs queues n jobs that sleep secs seconds at cm's schedd, each
// asking memMB of memory.
func submitJobs(t testing.TB, cm *agent.Agent, n, secs, memMB int, set ...string) {
	t.Helper()
	owner := "root"
	if u, err := user.Current(); err == nil {
		owner = u.Username
	}
	work := t.TempDir()
	os.Chmod(work, 0o777)
	sc := wire.NewSchedd(cm.APIAddr(), "")
	ctx := context.Background()
	nc, err := sc.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []wire.Ad
	for range n {
		jobs = append(jobs, wire.Ad{"Owner": strconv.Quote(owner), "Cmd": `"/bin/sleep"`, "Arguments": strconv.Quote(strconv.Itoa(secs)),
			"TransferExecutable": "false", "Iwd": strconv.Quote(work), "Out": `"/dev/null"`, "Err": `"/dev/null"`,
			"RequestMemory": strconv.Itoa(memMB), "RequestCpus": "1", "RequestDisk": "1024",
			"Requirements": "true", "JobUniverse": "5"})
		for i := 0; i+1 < len(set); i += 2 {
			jobs[len(jobs)-1][set[i]] = set[i+1]
		}
	}
	if _, err := sc.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
}

// queue counts cm's jobs by JobStatus.
func queue(t *testing.T, cm *agent.Agent) map[string]int {
	t.Helper()
	q, err := wire.NewSchedd(cm.APIAddr(), "").Queue(context.Background(), &wire.QueryJobsRequest{Projection: []string{"JobStatus"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, j := range q {
		out[j.Ad["JobStatus"]]++
	}
	return out
}

func sshSite(t testing.TB, srv *sshtest.Servers, slots int) *ssh.Site {
	t.Helper()
	s, err := ssh.New(sshConfig(srv, slots))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gs, _ := s.List(context.Background(), glidein.IDPrefix)
		for _, g := range gs {
			s.Cancel(context.Background(), g.ID)
		}
		s.Close()
	})
	return s
}

func sshConfig(srv *sshtest.Servers, slots int) ssh.Config {
	return ssh.Config{Hosts: srv.Hosts, User: srv.User, KeyFile: srv.KeyFile, KnownHosts: srv.KnownHosts,
		BaseDir: filepath.Join(srv.Dir, "base"), Slots: slots, ConnectTimeout: 5 * time.Second,
		KillGrace: 2 * time.Second, DefaultLifetime: 5 * time.Minute}
}

// agentLaunch starts glideins as real agents: this test binary run as
// `agent`, joining cm's sea and reporting to it, with one slot of 1 CPU
// and 512 MB.
func agentLaunch(t *testing.T, cm *agent.Agent) func(context.Context, api.FactoryEntrySpec, string) (glidein.Request, error) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	conf := fastCondor(t, "NUM_CPUS = 1\nMEMORY = 512\n")
	return func(ctx context.Context, e api.FactoryEntrySpec, id string) (glidein.Request, error) {
		args := []string{"agent", "-name", id, "-pool", "campus", "-condor-host", cm.APIAddr(),
			"-join", cm.Sea().GossipAddr(), "-data-dir", "{dir}/data", "-insecure-api", "-bind", "127.0.0.1:0",
			"-api", "127.0.0.1:0", "-gossip-profile", "fast", "-config", conf, "-glidein", id,
			"-lifetime", time.Duration(e.Template.Lifetime).String(), "-cm-timeout", "20s"}
		if e.Template.IdleTimeout > 0 {
			args = append(args, "-idle-timeout", time.Duration(e.Template.IdleTimeout).String())
		}
		files := map[string][]byte{}
		if len(e.Template.Validate) > 0 {
			data, _ := json.Marshal(e.Template.Validate)
			files["validate.json"] = data
			args = append(args, "-validate", "{dir}/validate.json")
		}
		return glidein.Request{Binary: exe, Args: args, Files: files}, nil
	}
}

// run runs f's cycles until the test ends.
func run(t *testing.T, f *factory.Factory) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func entryStatus(f *factory.Factory, name string) api.FactoryEntry {
	for _, e := range f.Status().Entries {
		if e.Name == name {
			return e
		}
	}
	return api.FactoryEntry{}
}

// waitCycles waits until the factory ended n more cycles (its status's
// LastCycle moved on n times): what a test sees it not do over them, it
// did not do in n looks at its pool and sites, however fast or slow they
// came.
func waitCycles(t *testing.T, f *factory.Factory, n int) {
	t.Helper()
	last := f.Status().LastCycle
	deadline := time.Now().Add(30 * time.Second)
	for seen := 0; seen < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the factory ended %d cycles in 30s, want %d", seen, n)
		}
		time.Sleep(20 * time.Millisecond)
		if c := f.Status().LastCycle; c.After(last) {
			last = c
			seen++
		}
	}
}

// active returns the glideins a site lists under prefix that have not
// ended.
func active(t *testing.T, s glidein.Site, prefix string) []glidein.Glidein {
	t.Helper()
	gs, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []glidein.Glidein
	for _, g := range gs {
		if !g.State.Ended() {
			out = append(out, g)
		}
	}
	return out
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// TestFactorySSH runs the factory over two real SSH hosts for a real pool:
// jobs queued at the central manager make it submit glideins (real
// agents) up to its limits, never for a job that asks more memory or CPUs
// than its glideins have, or a GPU they lack; they join and run the jobs;
// a glidein killed on its host behind the factory's back counts as lost
// and is replaced while jobs wait; idle glideins leave by themselves and,
// the queue holding only the jobs too big, the factory submits no more.
func TestFactorySSH(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 2)
	site := sshSite(t, srv, 2)
	scenario(t, site, func(g glidein.Glidein) error {
		sid, err := strconv.Atoi(g.SiteID[strings.LastIndexByte(g.SiteID, ':')+1:])
		if err != nil {
			return err
		}
		return killSession(sid)
	})
}

// killSession kills every process of session sid, as a host's operator
// or its out-of-memory killer might: the glidein's wrapper, its timeout
// (in a process group of its own) and its agent, none left to record an
// exit status.
func killSession(sid int) error {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return err
	}
	n := 0
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		i := bytes.LastIndexByte(raw, ')')
		if err != nil || i < 0 {
			continue
		}
		fields := strings.Fields(string(raw[i+1:]))
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if len(fields) > 3 && fields[3] == strconv.Itoa(sid) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("no process of session %d", sid)
	}
	return nil
}

// scenario is the life of TestFactorySSH on site, where kill ends a
// glidein behind the factory's back.
func scenario(t *testing.T, site glidein.Site, kill func(glidein.Glidein) error) {
	cm := startCM(t)
	const maxRunning = 3
	f, err := factory.New(factory.Options{
		Pool: "campus", DataDir: t.TempDir(),
		Source:         &factory.WirePool{CentralManager: cm.CondorHost},
		Sites:          func(api.FactoryEntrySpec) (glidein.Site, error) { return site, nil },
		Launch:         agentLaunch(t, cm),
		Interval:       500 * time.Millisecond,
		HeartbeatGrace: 5 * time.Second,
		JoinTimeout:    time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := api.FactoryEntrySpec{Name: "small", Site: api.FactorySite{Kind: "ssh"},
		Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 512, Lifetime: api.Duration(10 * time.Minute),
			IdleTimeout: api.Duration(6 * time.Second)},
		Limits: api.FactoryLimits{MaxQueued: 2, MaxRunning: maxRunning, MaxSubmitPerCycle: 2}}
	if err := f.SetEntry(e); err != nil {
		t.Fatal(err)
	}
	prefix := glidein.IDPrefix + "campus-small-"

	// The jobs too big alone (more memory, more CPUs, a GPU than the
	// entry's glideins have): nothing to submit.
	submitJobs(t, cm, 1, 1, 100000)
	submitJobs(t, cm, 1, 1, 64, "RequestCpus", "4")
	submitJobs(t, cm, 1, 1, 64, "RequestGpus", "1", "Requirements", "TARGET.Gpus >= RequestGpus")
	for range 4 {
		if err := f.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if st := entryStatus(f, "small"); st.Funnel.Requested != 0 || st.Matched != 0 {
		t.Fatalf("jobs too big made the entry of 1-CPU 512 MB glideins without GPU submit: %+v", st)
	}

	submitJobs(t, cm, 5, 8, 64)
	var mu sync.Mutex
	most := 0
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			gs, err := site.List(context.Background(), prefix)
			if err != nil {
				continue
			}
			n := 0
			for _, g := range gs {
				if !g.State.Ended() {
					n++
				}
			}
			mu.Lock()
			most = max(most, n)
			mu.Unlock()
		}
	}()
	defer func() { close(stop); <-watched }()
	run(t, f)

	// Glideins join and run jobs.
	waitFor(t, 60*time.Second, "jobs running on glideins", func() error {
		if q := queue(t, cm); q["2"] == 0 {
			return fmt.Errorf("queue %v, funnel %+v", q, entryStatus(f, "small").Funnel)
		}
		return nil
	})
	// One killed on its host, behind the factory's back.
	gs := active(t, site, prefix)
	if len(gs) == 0 {
		t.Fatal("no glidein running")
	}
	victim := gs[0]
	requested := entryStatus(f, "small").Funnel.Requested
	if err := kill(victim); err != nil {
		t.Fatalf("killing %s: %v", victim.ID, err)
	}
	waitFor(t, 90*time.Second, "the killed glidein counted lost and replaced", func() error {
		st := entryStatus(f, "small")
		// Jobs wait while it is lost: it is replaced beyond max_running's
		// glideins, whenever it was killed in the ramp.
		if st.Funnel.Lost == 0 || st.Funnel.Requested <= max(requested, maxRunning) {
			return fmt.Errorf("funnel %+v, events %+v", st.Funnel, st.Events)
		}
		return nil
	})
	// Every job but the big one runs and leaves the queue.
	waitFor(t, 120*time.Second, "the jobs that fit done", func() error {
		if q := queue(t, cm); q["1"] != 3 || q["2"] != 0 || len(q) != 1 {
			return fmt.Errorf("queue %v", q)
		}
		return nil
	})
	// The glideins leave once idle; the factory submits no more.
	waitFor(t, 60*time.Second, "the glideins gone", func() error {
		if gs := active(t, site, prefix); len(gs) > 0 {
			return fmt.Errorf("%d glideins left", len(gs))
		}
		return nil
	})
	before := entryStatus(f, "small").Funnel
	waitCycles(t, f, 4)
	after := entryStatus(f, "small")
	if after.Funnel.Requested != before.Requested || after.Wanted != 0 {
		t.Errorf("the factory went on submitting with only the job too big queued: %+v then %+v", before, after.Funnel)
	}
	if after.Funnel.Done == 0 || after.Funnel.Validated == 0 {
		t.Errorf("no glidein counted validated and done: %+v", after.Funnel)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > maxRunning {
		t.Errorf("%d glideins at once, above max_running %d", most, maxRunning)
	}
	if most < 2 {
		t.Errorf("at most %d glideins at once for 5 jobs: no ramp", most)
	}
	t.Logf("funnel %+v, at most %d at once", after.Funnel, most)
}

// TestFactoryBreaker starts glideins whose validation fails: each exits
// with code 3 and counts failed, and after the breaker's failures the
// entry submits nothing for its back-off, with the reason in its status.
func TestFactoryBreaker(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 1)
	site := sshSite(t, srv, 4)
	cm := startCM(t)
	f, err := factory.New(factory.Options{
		Pool: "campus", DataDir: t.TempDir(),
		Source:   &factory.WirePool{CentralManager: cm.CondorHost},
		Sites:    func(api.FactoryEntrySpec) (glidein.Site, error) { return site, nil },
		Launch:   agentLaunch(t, cm),
		Interval: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := api.FactoryEntrySpec{Name: "broken", Site: api.FactorySite{Kind: "ssh"},
		Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 512, Lifetime: api.Duration(5 * time.Minute),
			Validate: []api.ValidationCheck{{Type: "command", Name: "cvmfs", Shell: "test -d /no/such/cvmfs"}}},
		Limits:  api.FactoryLimits{MaxQueued: 2, MaxRunning: 2, MaxSubmitPerCycle: 2},
		Breaker: api.FactoryBreaker{Failures: 3, Window: api.Duration(time.Minute), Backoff: api.Duration(time.Hour)}}
	if err := f.SetEntry(e); err != nil {
		t.Fatal(err)
	}
	submitJobs(t, cm, 4, 1, 64)
	run(t, f)
	waitFor(t, 60*time.Second, "the breaker open", func() error {
		if st := entryStatus(f, "broken"); !st.Breaker.Open {
			return fmt.Errorf("funnel %+v, events %+v", st.Funnel, st.Events)
		}
		return nil
	})
	st := entryStatus(f, "broken")
	if !strings.Contains(st.Breaker.Reason, "validation") || st.Funnel.Failed < 3 {
		t.Errorf("breaker %+v, funnel %+v", st.Breaker, st.Funnel)
	}
	requested := st.Funnel.Requested
	waitCycles(t, f, 4)
	if st := entryStatus(f, "broken"); st.Funnel.Requested != requested {
		t.Errorf("submitted with its breaker open: %d then %d", requested, st.Funnel.Requested)
	}
	if q := queue(t, cm); q["1"] != 4 {
		t.Errorf("queue %v: the jobs ran on glideins that failed validation", q)
	}
}
