package acceptance

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkQueueStarts measures, through the real binary, the rate at
// which a pool starts and completes jobs while its schedd holds a queue of
// Q idle jobs that match no slot (requirements = false, one cluster
// each time the queue grows), as CondorJ2's Figures 13 and 14 do. One pool
// (one agent running the central manager, the schedd and a startd, and
// three more agents; two slots each, NEGOTIATOR_INTERVAL = 5, as
// examples/local, and MAX_JOBS_PER_OWNER raised from its 100,000 above
// the queue and the matching jobs) serves every Q, from the smallest up:
// the queue grows by the difference. At each Q, each iteration submits M trivial matching
// jobs (/bin/true, nothing transferred) and reads their job log every
// 20 ms. It reports starts/s (the execute events, 001, from the first to
// the last: the rate the negotiator and the schedd start jobs once the
// first one runs), jobs/s (from the submit to the last termination event,
// as BenchmarkLocalThroughput), first-start-s (the submit to the first
// execute event), and the CPU time per job of every agent with their
// children (agents-cpu-ms/job) and of the central manager's agent alone
// (cm-cpu-ms/job), the figures that hold on a shared machine.
//
// Q defaults to 1,000 (100 with -short) and M to 1,000 (20 with -short);
// QUEUESTARTS_SIZES=1000,10000,50000,100000 and QUEUESTARTS_JOBS=1000
// override them. For example (about 5 minutes on an idle machine):
//
//	go build -o bin/pondctl ./cmd/pondctl && QUEUESTARTS_SIZES=1000,10000,50000,100000 POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench QueueStarts -benchtime 3x -timeout 60m ./acceptance/
func BenchmarkQueueStarts(b *testing.B) {
	sizes, jobs := []int{1000}, []int{1000}
	if testing.Short() {
		sizes, jobs = []int{100}, []int{20}
	}
	sizes = benchSizes(b, "QUEUESTARTS_SIZES", sizes, 0)
	m := benchSizes(b, "QUEUESTARTS_JOBS", jobs, 2)
	if len(m) != 1 {
		b.Fatalf("QUEUESTARTS_JOBS: want one number of jobs, not %v", m)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] < sizes[i-1] {
			b.Fatalf("QUEUESTARTS_SIZES=%v: the queue only grows; list the sizes from the smallest", sizes)
		}
	}

	w := newBenchWorkdir(b)
	w.write("main.pond.hcl", `
provider "local" {}
pool "qs" {
  nodes  = 4
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "5", MAX_JOBS_PER_OWNER = "1000000" }
}
output "cm" {
  value = pool.qs.central_manager
}
`)
	load0 := loadAverage()
	if r := w.runFor(10*time.Minute, "apply", "-auto-approve"); r.code != 0 {
		b.Fatalf("creating the pool: %s", r)
	}
	defer w.runFor(10*time.Minute, "destroy", "-auto-approve")
	cm := w.output("cm")
	pids := agentPIDs(w.dir)
	if len(pids) != 4 {
		b.Fatalf("%d agents running, want 4", len(pids))
	}
	cmPID := agentPID(b, w, "qs-0")
	eventually(b, 2*time.Minute, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name")
		if got := strings.Count(r.stdout, "\n"); r.code != 0 || got < 8 {
			return fmt.Errorf("the collector holds %d of 8 slots: %.300s", got, r)
		}
		return nil
	})
	b.Logf("pool up (load average %s)", load0)

	// Each iteration's jobs have a log of their own: the testing package
	// runs a benchmark once before it runs it b.N times.
	queued, seq := 0, 0
	for _, q := range sizes {
		if n := q - queued; n > 0 {
			w.write("idle.sub", fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n))
			start := time.Now()
			r := w.runFor(20*time.Minute, "condor", "submit", "-pool", cm, "idle.sub")
			if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d job(s) submitted", n)) {
				b.Fatalf("condor submit of %d idle jobs: %s", n, r)
			}
			b.Logf("%d idle jobs submitted in %s (%.0f jobs/s), %d queued", n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds(), q)
			queued = q
		}
		b.Run(fmt.Sprintf("queued=%d", q), func(b *testing.B) { benchQueueStarts(b, w, cm, pids, cmPID, q, m[0], &seq) })
	}
}

func benchQueueStarts(b *testing.B, w *workdir, cm string, pids []int, cmPID, queued, m int, seq *int) {
	b.StopTimer()
	var starting, total, first time.Duration
	var agentsCPU, cmCPU time.Duration
	load0 := loadAverage()
	for range b.N {
		*seq++
		name := fmt.Sprintf("starts%d", *seq)
		w.write(name+".sub", fmt.Sprintf("executable = /bin/true\ntransfer_executable = false\nrequest_memory = 16\nlog = %s.log\nqueue %d\n", name, m))
		tally := &jobLogTally{path: filepath.Join(w.dir, name+".log"), events: map[string]map[string]int{}, total: map[string]int{}}
		all0, cm0 := agentsCPUTime(b, pids), agentsCPUTime(b, []int{cmPID})
		start := time.Now()
		b.StartTimer()
		r := w.runFor(10*time.Minute, "condor", "submit", "-pool", cm, name+".sub")
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d job(s) submitted", m)) {
			b.Fatalf("condor submit: %s", r)
		}
		var firstStart, lastStart time.Time
		deadline := start.Add(10 * time.Minute)
		for {
			tally.read(b)
			now := time.Now()
			if n := tally.total["001"]; n > 0 && firstStart.IsZero() {
				firstStart = now
			}
			if tally.total["001"] >= m && lastStart.IsZero() {
				lastStart = now
			}
			if tally.total["005"] >= m {
				break
			}
			if now.After(deadline) {
				b.Fatalf("at %d queued, %d of %d jobs started and %d terminated after %s", queued, tally.total["001"], m, tally.total["005"], now.Sub(start).Round(time.Second))
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.StopTimer()
		total += time.Since(start)
		agentsCPU += agentsCPUTime(b, pids) - all0
		cmCPU += agentsCPUTime(b, []int{cmPID}) - cm0
		starting += lastStart.Sub(firstStart)
		first += firstStart.Sub(start)
		for id, ev := range tally.events {
			if ev["005"] != 1 || ev["001"] != 1 {
				b.Fatalf("job %s: events %v, want one execute and one termination", id, ev)
			}
		}
		if len(tally.events) != m {
			b.Fatalf("%d jobs in the log, %d submitted", len(tally.events), m)
		}
	}
	jobs := float64(m * b.N)
	b.Logf("%d queued: %.1f starts/s, %.1f jobs/s, first start after %.2f s, %.1f ms of the agents' CPU a job (%.1f ms the central manager's); load average %s before, %s after",
		queued, (jobs-float64(b.N))/starting.Seconds(), jobs/total.Seconds(), first.Seconds()/float64(b.N),
		float64(agentsCPU.Microseconds())/1000/jobs, float64(cmCPU.Microseconds())/1000/jobs, load0, loadAverage())
	// From the first start to the last, m-1 more jobs start.
	b.ReportMetric((jobs-float64(b.N))/starting.Seconds(), "starts/s")
	b.ReportMetric(jobs/total.Seconds(), "jobs/s")
	b.ReportMetric(first.Seconds()/float64(b.N), "first-start-s")
	b.ReportMetric(float64(agentsCPU.Microseconds())/1000/jobs, "agents-cpu-ms/job")
	b.ReportMetric(float64(cmCPU.Microseconds())/1000/jobs, "cm-cpu-ms/job")
	b.ReportMetric(float64(queued), "queued")
}
