package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// benchAgent is an agent this process runs for a benchmark.
type benchAgent struct {
	a    *Agent
	cfg  *Config
	done chan struct{}
	stop context.CancelFunc
}

// startBenchAgent starts an agent with cfg (Bind, API, DataDir as given,
// the profile as given) that joins join, and stops it when tb ends.
func startBenchAgent(tb testing.TB, cfg *Config, join string) *benchAgent {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.InsecureAPI = true
	if join != "" {
		cfg.Join = []string{join}
	}
	a, err := New(ctx, cfg, nil)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	ba := &benchAgent{a: a, cfg: cfg, done: make(chan struct{}), stop: cancel}
	go func() { a.Run(ctx); close(ba.done) }()
	tb.Cleanup(ba.close)
	return ba
}

// close stops the agent and waits for it.
func (ba *benchAgent) close() {
	ba.stop()
	<-ba.done
}

// kill stops the agent as kill -9 would: its sockets close without a
// word to the sea (serf's Shutdown, not Leave), and its daemons end.
func (ba *benchAgent) kill() {
	ba.a.sea.Shutdown()
	ba.close()
}

// BenchmarkFailoverTakeover measures a pool's central-manager fail-over
// with real in-process agents on the gossip profile pondctl's local
// provider uses ("local"): a sea of N agents, of which a pool of the
// manager, R replicas and one worker (the other agents are free nodes
// that run only a master); the manager is killed (its sockets closed
// without leaving); the time to a replica acting and negotiating (a cycle
// of its negotiator after the kill), and to the worker following it, are
// reported as takeover-s and follow-s (means over b.N kills). After each
// kill the manager comes back on its old gossip address and takes the
// pool back (handback-s, with no hand-back hold-down), so that the next
// kill finds the pool as the first did. The replicas are chosen among the
// pool's members by the manager, so the worker may be one of them. -short
// runs only the sea of 4.
func BenchmarkFailoverTakeover(b *testing.B) {
	seas := []int{4, 16, 48}
	if testing.Short() {
		seas = seas[:1]
	}
	for _, n := range seas {
		for _, r := range []int{1, 2, 3} {
			if r+2 > n {
				continue
			}
			b.Run(fmt.Sprintf("sea=%d/replicas=%d", n, r), func(b *testing.B) { benchTakeover(b, n, r) })
		}
	}
}

func benchTakeover(b *testing.B, n, replicas int) {
	knobs := map[string]string{"POND_CM_REPLICAS": strconv.Itoa(replicas), "POND_CM_HANDBACK_HOLD_DOWN": "0s"}
	condor := filepath.Join(b.TempDir(), "condor_config")
	if err := os.WriteFile(condor, []byte("NEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 0\nUPDATE_INTERVAL = 1\nNUM_CPUS = 1\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	free := filepath.Join(b.TempDir(), "free_config")
	if err := os.WriteFile(free, []byte("DAEMON_LIST = MASTER\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	const profile = "local"
	cmCfg := func(bind, dir string) *Config {
		return &Config{Name: "campus-0", Role: "cm", Pool: "campus", Knobs: knobs, ConfigFile: condor,
			Bind: bind, API: "127.0.0.1:0", GossipProfile: profile, DataDir: dir}
	}
	cmDir := b.TempDir()
	cm := startBenchAgent(b, cmCfg("127.0.0.1:0", cmDir), "")
	join := cm.a.Sea().GossipAddr()
	var pool []*benchAgent
	for i := 1; i <= replicas+1; i++ {
		pool = append(pool, startBenchAgent(b, &Config{Name: "campus-" + strconv.Itoa(i), Role: "node", Pool: "campus",
			CondorHost: cm.a.APIAddr(), Knobs: knobs, ConfigFile: condor, Bind: "127.0.0.1:0", API: "127.0.0.1:0",
			GossipProfile: profile, DataDir: b.TempDir()}, join))
	}
	for i := len(pool) + 1; i < n; i++ {
		startBenchAgent(b, &Config{Name: "free-" + strconv.Itoa(i), Role: "node", ConfigFile: free, Bind: "127.0.0.1:0",
			API: "127.0.0.1:0", GossipProfile: profile, DataDir: b.TempDir()}, join)
	}
	wait := func(timeout time.Duration, what string, cond func() error) {
		b.Helper()
		deadline := time.Now().Add(timeout)
		for {
			err := cond()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("waiting for %s: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	settled := func() error {
		if got := len(cm.a.Sea().Members()); got != n {
			return fmt.Errorf("the manager sees %d members of %d", got, n)
		}
		fs := cm.a.FailoverStatus()
		if !fs.Acting || fs.State == nil || len(fs.State.Replicas) != replicas {
			return fmt.Errorf("the manager's state %+v", fs)
		}
		for _, p := range pool {
			pf := p.a.FailoverStatus()
			if pf.Acting || pf.ManagerEpoch != fs.Epoch {
				return fmt.Errorf("%s follows epoch %d, acting %v; the manager's is %d", p.cfg.Name, pf.ManagerEpoch, pf.Acting, fs.Epoch)
			}
			if pf.State == nil || pf.State.Epoch != fs.Epoch {
				if slices.Contains(fs.State.Replicas, p.cfg.Name) {
					return fmt.Errorf("replica %s holds no state of epoch %d", p.cfg.Name, fs.Epoch)
				}
			}
		}
		return nil
	}
	var takeover, follow, handback time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		wait(120*time.Second, "the sea to settle", settled)
		// Let serf's failure detector settle too: the first probes of a
		// new sea are not those of a sea that has run a while.
		time.Sleep(3 * time.Second)
		epoch := cm.a.FailoverStatus().Epoch
		worker := pool[len(pool)-1]
		bind := cm.a.Sea().GossipAddr()
		b.StartTimer()
		killed := time.Now()
		cm.kill()
		var acting *benchAgent
		wait(120*time.Second, "a replica to negotiate", func() error {
			for _, p := range pool {
				fs := p.a.FailoverStatus()
				if fs.Acting && fs.Epoch > epoch && fs.LastCycle.After(killed) {
					acting = p
					return nil
				}
			}
			var sts []string
			for _, p := range pool {
				fs := p.a.FailoverStatus()
				sts = append(sts, fmt.Sprintf("%s acting=%v epoch=%d cycle=%v follows=%s", p.cfg.Name, fs.Acting, fs.Epoch, fs.LastCycle, fs.Manager))
			}
			return fmt.Errorf("no replica negotiates: %v", sts)
		})
		took := time.Since(killed)
		wait(60*time.Second, "the worker to follow", func() error {
			if fs := worker.a.FailoverStatus(); fs.ManagerEpoch != acting.a.FailoverStatus().Epoch {
				return fmt.Errorf("the worker follows epoch %d", fs.ManagerEpoch)
			}
			return nil
		})
		followed := time.Since(killed)
		b.StopTimer()
		takeover += took
		follow += followed
		b.Logf("sea=%d replicas=%d: %s took over in %.2f s; the worker followed in %.2f s", n, replicas, acting.cfg.Name, took.Seconds(), followed.Seconds())
		// The manager comes back where it was and takes the pool back.
		back := time.Now()
		cm = startBenchAgent(b, cmCfg(bind, cmDir), pool[0].a.Sea().GossipAddr())
		wait(120*time.Second, "the hand-back", func() error {
			if fs := acting.a.FailoverStatus(); fs.Acting {
				return fmt.Errorf("%s still acts", acting.cfg.Name)
			}
			return settled()
		})
		handback += time.Since(back)
	}
	b.ReportMetric(takeover.Seconds()/float64(b.N), "takeover-s")
	b.ReportMetric(follow.Seconds()/float64(b.N), "follow-s")
	b.ReportMetric(handback.Seconds()/float64(b.N), "handback-s")
	b.ReportMetric(0, "ns/op")
}
