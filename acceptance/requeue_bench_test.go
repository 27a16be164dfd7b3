package acceptance

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRequeueLatency measures, in pools of N real agents (LAN gossip
// profile, two slots each), the time from kill -9 of a worker running two
// jobs to the requeue of its jobs (the `024` event in their log), and to
// the sea's word that the node failed (`022`). Each iteration kills another
// worker; the jobs are pinned to it, so that nothing else of the pool
// changes. The timer runs from the kill to the requeue, so ns/op is that
// latency; kill-to-requeue-s and kill-to-disconnected-s report it in
// seconds. Sizes default to 5, 20 and 50; REQUEUEBENCH_SIZES=5,10
// overrides them. Run it with the built binary, for example:
//
//	make build && POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench RequeueLatency -benchtime 3x -timeout 30m ./acceptance/
func BenchmarkRequeueLatency(b *testing.B) {
	sizes := benchSizes(b, "REQUEUEBENCH_SIZES", []int{5, 20, 50}, 2)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) { benchRequeue(b, n) })
	}
}

func benchRequeue(b *testing.B, n int) {
	b.StopTimer()
	w := newBenchWorkdir(b)
	w.write("main.pond.hcl", fmt.Sprintf(`
provider "local" {
  gossip_profile = "lan"
}
pool "rq" {
  nodes  = %d
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}
output "cm" {
  value = pool.rq.central_manager
}
`, n))
	if r := w.run("apply", "-auto-approve"); r.code != 0 {
		b.Fatalf("creating the pool: %s", r)
	}
	defer w.run("destroy", "-auto-approve")
	cm := w.output("cm")
	if b.N > n-1 {
		b.Fatalf("%d iterations need %d workers to kill; the pool has %d (use -benchtime %dx or less)", b.N, b.N, n-1, n-1)
	}
	var requeue, disconnect time.Duration
	for i := range b.N {
		victim := fmt.Sprintf("rq-%d", n-1-i)
		log := fmt.Sprintf("rq%d.log", i)
		w.write(fmt.Sprintf("rq%d.sub", i), fmt.Sprintf(`
executable   = /bin/sleep
arguments    = 60
requirements = Machine == "%s"
log          = %s
queue 2
`, victim, log))
		r := w.run("condor", "submit", "-pool", cm, fmt.Sprintf("rq%d.sub", i))
		if r.code != 0 {
			b.Fatalf("condor submit: %s", r)
		}
		cluster := i + 1
		eventually(b, 120*time.Second, func() error {
			r := w.run("condor", "q", "-pool", cm, "-constraint", fmt.Sprintf("ClusterId == %d && JobStatus == 2", cluster), "-af", "ProcId")
			if got := strings.Count(r.stdout, "\n"); r.code != 0 || got < 2 {
				return fmt.Errorf("%d of 2 jobs running on %s: %s", got, victim, r)
			}
			return nil
		})
		pid := agentPID(b, w, victim)
		jobs := descendants(pid)
		// The renewals are every 2 s: kill at a random point between two.
		time.Sleep(time.Duration(1000+i*700%2000) * time.Millisecond)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		b.StartTimer()
		var disconnected time.Duration
		eventually(b, 90*time.Second, func() error {
			ev := logEvents(b, filepath.Join(w.dir, log))
			if disconnected == 0 && total(ev["022"]) > 0 {
				disconnected = time.Since(killed)
			}
			if total(ev["024"]) < 2 {
				return fmt.Errorf("%d of 2 jobs requeued", total(ev["024"]))
			}
			return nil
		})
		took := time.Since(killed)
		b.StopTimer()
		requeue += took
		disconnect += disconnected
		b.Logf("%s killed: disconnected after %s, requeued after %s", victim, disconnected.Round(100*time.Millisecond), took.Round(100*time.Millisecond))
		// The dead agent's jobs ran on; they and the requeued copies,
		// pinned to the dead node, go.
		for _, j := range jobs {
			_ = syscall.Kill(j, syscall.SIGKILL)
		}
		w.run("condor", "rm", "-pool", cm, strconv.Itoa(cluster))
	}
	b.ReportMetric(requeue.Seconds()/float64(b.N), "kill-to-requeue-s")
	b.ReportMetric(disconnect.Seconds()/float64(b.N), "kill-to-disconnected-s")
}

// agentPID is the process id of the agent named name started from w.
func agentPID(t testing.TB, w *workdir, name string) int {
	t.Helper()
	pids := slices.DeleteFunc(agentPIDs(w.dir), func(pid int) bool { return !cmdlineHas(pid, "-name", name) })
	if len(pids) != 1 {
		t.Fatalf("%d agents named %s", len(pids), name)
	}
	return pids[0]
}
