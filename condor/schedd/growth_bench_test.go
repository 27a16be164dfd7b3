package schedd_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// idleFile is a cluster of jobs that never match, as in a queue that only
// grows: executable = /bin/true, requirements = false.
func idleFile(n int) string {
	return fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n)
}

// fill submits n never-matching jobs in clusters of at most 10,000.
func (n *node) fill(jobs int) {
	for jobs > 0 {
		c := min(jobs, 10000)
		n.submitFile("alice", idleFile(c))
		jobs -= c
	}
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
// job, the submit rate of another 1,000-job cluster, a negotiator's fetch
// of the idle jobs (one per cycle), and condor q's query.
func BenchmarkQueueGrowth(b *testing.B) {
	for _, size := range []int{1000, 10000, 50000} {
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
			b.Run("q", func(b *testing.B) {
				for b.Loop() {
					jobs, err := n.c.Queue(ctx, &wire.QueryJobsRequest{})
					if err != nil || len(jobs) < size {
						b.Fatal(len(jobs), err)
					}
					for _, j := range jobs {
						if _, err := wire.ToClassAd(j.Ad); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
			b.Run("submit1000", func(b *testing.B) {
				for b.Loop() {
					n.submitFile("alice", idleFile(1000))
				}
				b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
			})
		})
	}
}
