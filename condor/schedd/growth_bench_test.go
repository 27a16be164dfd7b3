package schedd_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// idleFile is a cluster of jobs that never match, as in a queue that only
// grows: executable = /bin/true, requirements = false.
func idleFile(n int) string {
	return fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n)
}

// benchQueueSizes are the queue lengths a benchmark of the queue's growth
// measures: 1,000, 10,000 and 50,000 jobs, or, with -short (make
// bench-smoke, which only checks that the benchmark still runs), 100 and
// 1,000.
func benchQueueSizes() []int {
	if testing.Short() {
		return []int{100, 1000}
	}
	return []int{1000, 10000, 50000}
}

// fill submits n never-matching jobs in clusters of at most 10,000.
func (n *node) fill(jobs int) {
	for jobs > 0 {
		c := min(jobs, 10000)
		n.submitFile("alice", idleFile(c))
		jobs -= c
	}
}

// cpuTime is the CPU time the process (client and schedd) used so far:
// on a shared machine, a steadier measure of work than the wall clock.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkQueueGrowth measures, at 1,000, 10,000 and 50,000 idle jobs in
// the queue, what must not grow with it: the schedd's memory per queued
// job, the submit rate of another 1,000-job cluster (and its CPU per job,
// steadier on a shared machine), a negotiator's fetch of the idle jobs
// (one per cycle), condor q's summary and its first streamed job; and how
// condor q -nobatch, which reads every job, grows.
func BenchmarkQueueGrowth(b *testing.B) {
	for _, size := range benchQueueSizes() {
		b.Run(fmt.Sprintf("queued=%d", size), func(b *testing.B) {
			before := heapInUse()
			n := start(b)
			n.fill(size)
			after := heapInUse()
			ctx := context.Background()
			b.Run("memory", func(b *testing.B) {
				for b.Loop() {
				}
				b.ReportMetric(float64(int64(after)-int64(before))/float64(size), "heap-bytes/job")
			})
			b.Run("negotiate", func(b *testing.B) {
				// A negotiator with 8 slots referring to Cpus and Memory;
				// its first request files the jobs by them, once.
				req := &wire.IdleRequest{Owner: "alice", SignificantAttrs: []string{"cpus", "memory"}, Limit: 8}
				if _, err := n.c.IdleClusters(ctx, req); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := n.c.IdleClusters(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("q-summary", func(b *testing.B) {
				// condor q's default view: counts, no ads.
				for b.Loop() {
					sum, err := n.c.QueueSummary(ctx, &wire.QueryJobsRequest{})
					if err != nil {
						b.Fatal(err)
					}
					jobs := 0
					for _, g := range sum.Groups {
						jobs += g.Jobs
					}
					if jobs < size {
						b.Fatal(jobs)
					}
				}
			})
			b.Run("q-first-row", func(b *testing.B) {
				// condor q -l: until its first job arrives.
				stop := errors.New("first")
				for b.Loop() {
					err := n.c.QueueEach(ctx, &wire.QueryJobsRequest{}, func(j wire.Job) error {
						if _, err := wire.ToClassAd(j.Ad); err != nil {
							return err
						}
						return stop
					})
					if !errors.Is(err, stop) {
						b.Fatal(err)
					}
				}
			})
			b.Run("q-nobatch", func(b *testing.B) {
				// condor q -nobatch: every job, the attributes it shows.
				req := &wire.QueryJobsRequest{Projection: []string{"ClusterId", "ProcId", "Owner", "QDate", "RemoteWallClockTime",
					"JobStatus", "JobCurrentStartDate", "JobPrio", "ImageSize", "Cmd", "Arguments", "Args"}}
				for b.Loop() {
					jobs := 0
					err := n.c.QueueEach(ctx, req, func(j wire.Job) error {
						jobs++
						_, err := wire.ToClassAd(j.Ad)
						return err
					})
					if err != nil || jobs < size {
						b.Fatal(jobs, err)
					}
				}
			})
			b.Run("submit1000", func(b *testing.B) {
				cpu := cpuTime(b)
				for b.Loop() {
					n.submitFile("alice", idleFile(1000))
				}
				b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
				b.ReportMetric((cpuTime(b)-cpu).Seconds()*1000/float64(b.N*1000), "cpu-ms/job")
			})
		})
	}
}
