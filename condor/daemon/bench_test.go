package daemon_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// BenchmarkThroughputTrivialJobs measures sustained throughput of trivial
// jobs (/bin/true, nothing transferred) through submission, negotiation,
// claiming and claim reuse on a local pool: a central manager with the
// schedd and one execute node whose partitionable slot has 32 cpus. Run it
// with a fixed job count, e.g. -benchtime=2000x; it reports jobs/s, and
// the CPU time per job of the daemons' process (cpu-ms/job: user and
// system, what a loaded machine still measures fairly) and of the
// processes it waited for or that still run, the jobs' supervisors and jobs
// (child-cpu-ms/job).
func BenchmarkThroughputTrivialJobs(b *testing.B) {
	knobs := testpool.Knobs{"NUM_CPUS": "32", "MEMORY": "32768", "UPDATE_INTERVAL": "5"}
	cm := testpool.Start(b, "cm", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	exec1 := testpool.Start(b, "exec1", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr})
	sd := cm.Master.Schedd()
	testpool.Eventually(b, 10*time.Second, "the slot to be advertised", func() bool { return slotNames(b, cm) != "" })
	dir := b.TempDir()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cm.Master)
	nodes := []*testpool.Node{cm, exec1}
	calls0 := make([]map[string]int64, len(nodes))
	for i, n := range nodes {
		calls0[i] = n.Requests()
	}
	commits0 := queueCommits(b, reg)
	b.ResetTimer()
	self0, child0 := cpuTime(b, syscall.RUSAGE_SELF), cpuTime(b, syscall.RUSAGE_CHILDREN)+liveChildrenCPU()
	start := time.Now()
	sub := fmt.Sprintf("executable = /bin/true\ntransfer_executable = false\nrequest_memory = 16\nqueue %d\n", b.N)
	submitText(b, cm.Client().Schedd(), dir, jobOwner(b), sub)
	for {
		n, err := sd.Queue().Counts(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if n[jobqueue.Idle]+n[jobqueue.Running] == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	// The calls each node served and the schedd's queue transactions, per
	// job: what a job costs in requests between the daemons.
	var calls int64
	for i, n := range nodes {
		for path, v := range n.Requests() {
			if d := v - calls0[i][path]; d > 0 {
				calls += d
				b.ReportMetric(float64(d)/float64(b.N), n.Name+":"+path+"/job")
			}
		}
	}
	b.ReportMetric(float64(calls)/float64(b.N), "calls/job")
	b.ReportMetric((queueCommits(b, reg)-commits0)/float64(b.N), "commits/job")
	self, child := cpuTime(b, syscall.RUSAGE_SELF)-self0, cpuTime(b, syscall.RUSAGE_CHILDREN)+liveChildrenCPU()-child0
	b.ReportMetric(float64(b.N)/el.Seconds(), "jobs/s")
	b.ReportMetric(float64(self.Microseconds())/1000/float64(b.N), "cpu-ms/job")
	b.ReportMetric(float64(child.Microseconds())/1000/float64(b.N), "child-cpu-ms/job")
}

// queueCommits is how many write transactions the schedd's job queue
// committed so far, from its metrics in reg.
func queueCommits(b *testing.B, reg *prometheus.Registry) float64 {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "pond_schedd_queue_commit_seconds" {
			return float64(mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	b.Fatal("no pond_schedd_queue_commit_seconds in the schedd's metrics")
	return 0
}

// liveChildrenCPU is the CPU time of the process's children still running
// (the supervisors that stay for their claims' jobs) and of what they
// waited for: not yet counted as the process's children's.
func liveChildrenCPU() time.Duration {
	var ticks int64
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		raw, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, pid := range strings.Fields(string(raw)) {
			st, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// utime, stime, cutime, cstime: the 14th to 17th fields.
			s := string(st)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			for i := 11; i < 15 && i < len(f); i++ {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				ticks += v
			}
		}
	}
	// USER_HZ, 100 a second on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond
}

// cpuTime is the user and system CPU time of who (syscall.RUSAGE_SELF or
// syscall.RUSAGE_CHILDREN) so far.
func cpuTime(b *testing.B, who int) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
