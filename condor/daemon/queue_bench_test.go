package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// queueSizesEnv lists the queue sizes BenchmarkQueueFlat fills, comma
// separated; by default one small size, so that a run of every benchmark
// once stays cheap.
const queueSizesEnv = "POND_BENCH_QUEUE_SIZES"

func queueSizes(b *testing.B) []int {
	v := os.Getenv(queueSizesEnv)
	if v == "" {
		return []int{1000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: %q is not a positive number of jobs", queueSizesEnv, v, f)
		}
		out = append(out, n)
	}
	return out
}

// startJobs is the size of the cluster of matching jobs whose starts
// BenchmarkQueueFlat times.
const startJobs = 200

// startsProfileEnv names a file that BenchmarkQueueFlat's starts part
// writes the CPU profile of its starts to, the queue's size appended
// (PATH.1000), to see what a start costs apart from the filling of the
// queue.
const startsProfileEnv = "POND_BENCH_STARTS_CPUPROFILE"

// logEvents counts the execute (001) and termination (005) events of the
// job log at path, none if it is not there yet.
func logEvents(b *testing.B, path string) (started, ended int) {
	b.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "001 ("):
			started++
		case strings.HasPrefix(line, "005 ("):
			ended++
		}
	}
	return started, ended
}

// processCPU is the CPU time, user and system, this process and the
// children it waited for used so far: every daemon of an in-process pool,
// and the jobs.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatal(err)
	}
	var d time.Duration
	for _, tv := range []syscall.Timeval{self.Utime, self.Stime, children.Utime, children.Stime} {
		d += time.Duration(tv.Nano())
	}
	return d
}

// BenchmarkQueueFlat measures, on a pool of real daemons in process (a
// central manager with its schedd, one execute node), what must not grow
// with the number of idle jobs queued (that never match: requirements =
// false, clusters of at most 10,000): the submit rate of another 1,000-job
// cluster, a whole negotiation cycle (the collector's ads, the schedd's
// idle autoclusters, matching), the latency of a new matching job from
// its submit to its start, the rate a cluster of 200 matching jobs
// starts (from the first execute event in their log to the last) and
// completes, with the CPU time per job of the whole process (every
// daemon) and of the jobs, condor q's summary, and job queries whose
// constraint pins ClusterId and ProcId, Owner, or JobStatus. The sizes
// are POND_BENCH_QUEUE_SIZES (default 1000); POND_BENCH_STARTS_CPUPROFILE
// profiles the starts.
func BenchmarkQueueFlat(b *testing.B) {
	for _, size := range queueSizes(b) {
		b.Run(fmt.Sprintf("queued=%d", size), func(b *testing.B) {
			knobs := testpool.Knobs{"NUM_CPUS": "2", "MEMORY": "2048", "UPDATE_INTERVAL": "1"}
			cm := testpool.Start(b, "cm", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD", "MAX_JOBS_PER_OWNER": "1000000"})
			testpool.Start(b, "exec1", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr})
			testpool.Eventually(b, 10*time.Second, "the slot to be advertised", func() bool { return slotNames(b, cm) != "" })
			ctx := context.Background()
			sd := cm.Master.Schedd()
			owner := jobOwner(b)
			dir := b.TempDir()
			never := func(n int) string {
				return fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n)
			}
			first := 0
			for left := size; left > 0; left -= min(left, 10000) {
				r := submitText(b, cm.Client().Schedd(), dir, owner, never(min(left, 10000)))
				if first == 0 {
					first = r.Cluster
				}
			}
			// Another owner's few jobs, for the query by Owner.
			submitText(b, cm.Client().Schedd(), dir, "alice", never(3))
			sc := cm.Client().Schedd()

			b.Run("submit1000", func(b *testing.B) {
				for b.Loop() {
					submitText(b, cm.Client().Schedd(), dir, owner, never(1000))
				}
				b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
			})
			b.Run("negotiate", func(b *testing.B) {
				neg := cm.Master.Negotiator()
				idle := 0
				for b.Loop() {
					st, err := neg.Cycle(ctx)
					if err != nil {
						b.Fatal(err)
					}
					idle = st.IdleJobs
				}
				b.ReportMetric(float64(idle), "idle-jobs-seen")
			})
			b.Run("start", func(b *testing.B) {
				// A job that matches, from its submit until it runs.
				for b.Loop() {
					r := submitText(b, cm.Client().Schedd(), dir, owner,
						"executable = /bin/true\ntransfer_executable = false\nrequest_memory = 16\nqueue 1\n")
					for {
						j, err := sd.Queue().Get(ctx, jobqueue.JobID{Cluster: r.Cluster})
						if err != nil || j.Status != jobqueue.Idle {
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
			// Each iteration's jobs have a log of their own: the
			// testing package runs a benchmark once before it runs it
			// b.N times.
			seq := 0
			b.Run("starts", func(b *testing.B) {
				// A cluster of startJobs matching jobs, from the first
				// execute event in their log to the last: the rate the
				// negotiator and the schedd start jobs with the queue
				// behind them.
				var starting, total, cpu time.Duration
				if path := os.Getenv(startsProfileEnv); path != "" {
					f, err := os.Create(fmt.Sprintf("%s.%d", path, size))
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					if err := pprof.StartCPUProfile(f); err != nil {
						b.Fatal(err)
					}
					defer pprof.StopCPUProfile()
				}
				for range b.N {
					b.StopTimer()
					seq++
					log := filepath.Join(dir, fmt.Sprintf("starts%d.log", seq))
					cpu0 := processCPU(b)
					b.StartTimer()
					t0 := time.Now()
					submitText(b, cm.Client().Schedd(), dir, owner, fmt.Sprintf(
						"executable = /bin/true\ntransfer_executable = false\nrequest_memory = 16\nlog = %s\nqueue %d\n", log, startJobs))
					var first, last time.Time
					for deadline := t0.Add(5 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
						started, ended := logEvents(b, log)
						now := time.Now()
						if started > 0 && first.IsZero() {
							first = now
						}
						if started >= startJobs && last.IsZero() {
							last = now
						}
						if ended >= startJobs {
							break
						}
						if now.After(deadline) {
							b.Fatalf("%d of %d jobs started, %d ended after %s", started, startJobs, ended, now.Sub(t0))
						}
					}
					total += time.Since(t0)
					starting += last.Sub(first)
					cpu += processCPU(b) - cpu0
				}
				b.ReportMetric(float64(b.N*(startJobs-1))/starting.Seconds(), "starts/s")
				b.ReportMetric(float64(b.N*startJobs)/total.Seconds(), "jobs/s")
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N*startJobs), "cpu-ms/job")
			})
			b.Run("q-summary", func(b *testing.B) {
				for b.Loop() {
					if _, err := sc.QueueSummary(ctx, &wire.QueryJobsRequest{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			for _, q := range []struct {
				name, constraint string
				want             int
			}{
				{"q-cluster-proc", fmt.Sprintf("ClusterId == %d && ProcId == 5", first), 1},
				{"q-owner", `Owner == "alice"`, 3},
				{"q-running", "JobStatus == 2", -1},
			} {
				b.Run(q.name, func(b *testing.B) {
					for b.Loop() {
						jobs, err := sc.Queue(ctx, &wire.QueryJobsRequest{Constraint: q.constraint})
						if err != nil {
							b.Fatal(err)
						}
						if q.want >= 0 && len(jobs) != q.want {
							b.Fatalf("%s: %d jobs, want %d", q.constraint, len(jobs), q.want)
						}
					}
				})
			}
		})
	}
}
