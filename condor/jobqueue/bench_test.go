package jobqueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchQueue(b *testing.B, sync string) *Queue {
	q, err := OpenWith(context.Background(), filepath.Join(b.TempDir(), "q.db"), Options{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

// realistic returns n job ads as the submit package expands a typical file.
func realistic(b *testing.B, n int) []Ad {
	return expandFile(b, "executable = /bin/true\narguments = $(Process)\noutput = out.$(Process)\nerror = err.$(Process)\nlog = job.log\nrequest_memory = 1G\nqueue "+itoa(n)+"\n", 1)
}

func itoa(n int) string {
	return string(rune('0'+n/1000%10)) + string(rune('0'+n/100%10)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}

func benchSubmit(b *testing.B, n int, sync string) {
	q := benchQueue(b, sync)
	jobs := realistic(b, n)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := q.Submit(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkSubmit1(b *testing.B)        { benchSubmit(b, 1, "NORMAL") }
func BenchmarkSubmit1000(b *testing.B)     { benchSubmit(b, 1000, "NORMAL") }
func BenchmarkSubmit1Full(b *testing.B)    { benchSubmit(b, 1, "FULL") }
func BenchmarkSubmit1000Full(b *testing.B) { benchSubmit(b, 1000, "FULL") }

// benchTransitions measures single-job state changes: each iteration is one
// transaction (Idle->Running or Running->Idle).
func benchTransitions(b *testing.B, sync string) {
	q := benchQueue(b, sync)
	ctx := context.Background()
	c, err := q.Submit(ctx, realistic(b, 100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		id := JobID{c, i % 100}
		to := Running
		if (i/100)%2 == 1 {
			to = Idle
		}
		if err := q.Transition(ctx, id, to, nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
}

func BenchmarkTransition(b *testing.B)     { benchTransitions(b, "NORMAL") }
func BenchmarkTransitionFull(b *testing.B) { benchTransitions(b, "FULL") }

// BenchmarkLifecycle runs whole trivial jobs: submit (1-job cluster),
// Running, Completed (to history) — three transactions per job.
func BenchmarkLifecycle(b *testing.B) {
	q := benchQueue(b, "NORMAL")
	ctx := context.Background()
	jobs := realistic(b, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, err := q.Submit(ctx, jobs)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Transition(ctx, JobID{c, 0}, Running, Ad{"RemoteHost": `"slot1@node"`}); err != nil {
			b.Fatal(err)
		}
		if err := q.Transition(ctx, JobID{c, 0}, Completed, Ad{"ExitCode": "0"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkApplyBatch100 changes 100 jobs per transaction, as a schedd
// batching its updates would.
func BenchmarkApplyBatch100(b *testing.B) {
	q := benchQueue(b, "NORMAL")
	ctx := context.Background()
	c, err := q.Submit(ctx, realistic(b, 100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		to := Running
		if i%2 == 1 {
			to = Idle
		}
		batch := make([]Change, 100)
		for p := range batch {
			batch[p] = Change{ID: JobID{c, p}, To: to}
		}
		if err := q.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "transitions/s")
}

func BenchmarkIdle1000(b *testing.B) {
	q := benchQueue(b, "NORMAL")
	ctx := context.Background()
	if _, err := q.Submit(ctx, realistic(b, 1000)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		jobs, err := q.Idle(ctx)
		if err != nil || len(jobs) != 1000 {
			b.Fatal(err, len(jobs))
		}
	}
}

// benchSizes are the queue sizes of the benchmarks that show what a pass
// over the queue costs as it grows: POND_BENCH_QUEUE_SIZES, comma
// separated, or one small size.
func benchSizes(b *testing.B) []int {
	v := os.Getenv("POND_BENCH_QUEUE_SIZES")
	if v == "" {
		return []int{1000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("POND_BENCH_QUEUE_SIZES=%q: %q is not a positive number of jobs", v, f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkPeriodicPass walks the queue as the schedd's periodic policy
// does (pages of 500 of the jobs carrying PeriodicHold, PeriodicRelease
// or PeriodicRemove other than false), with idle jobs of which none, or
// one cluster of 100, carry one.
func BenchmarkPeriodicPass(b *testing.B) {
	ctx := context.Background()
	for _, size := range benchSizes(b) {
		q := benchQueue(b, "NORMAL")
		for c, left := 1, size; left > 0; c, left = c+1, left-min(left, 10000) {
			// As condor_submit makes them: PeriodicHold, PeriodicRelease
			// and PeriodicRemove false.
			jobs := expandFile(b, fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nqueue %d\n", min(left, 10000)), c)
			if _, err := q.Submit(ctx, jobs); err != nil {
				b.Fatal(err)
			}
		}
		pass := func(b *testing.B, want int) {
			for b.Loop() {
				pq := PageQuery{Limit: 500, Status: []Status{Idle, Running, Held, Suspended, TransferringOutput},
					Carrying: []string{"PeriodicHold", "PeriodicRelease", "PeriodicRemove"}}
				n := 0
				for {
					page, err := q.Page(ctx, pq)
					if err != nil {
						b.Fatal(err)
					}
					n += len(page)
					if len(page) < pq.Limit {
						break
					}
					pq.After = page[len(page)-1].ID
				}
				if n != want {
					b.Fatalf("%d jobs carry a periodic expression, want %d", n, want)
				}
			}
		}
		b.Run(fmt.Sprintf("queued=%d/none", size), func(b *testing.B) { pass(b, 0) })
		periodic := ads(100, "bob")
		for i := range periodic {
			periodic[i]["PeriodicRemove"] = "JobStatus == 5"
		}
		if _, err := q.Submit(ctx, periodic); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("queued=%d/100", size), func(b *testing.B) { pass(b, 100) })
	}
}

// BenchmarkGet reads one job of a queue of 1,000 with all its
// attributes, as the schedd does as each job starts and ends.
func BenchmarkGet(b *testing.B) {
	q := benchQueue(b, "NORMAL")
	ctx := context.Background()
	cluster, err := q.Submit(ctx, realistic(b, 1000))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	defer func() { b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op") }()
	i := 0
	for b.Loop() {
		j, err := q.Get(ctx, JobID{Cluster: cluster, Proc: i % 1000})
		if err != nil || j.Ad["Args"] == "" {
			b.Fatal(err, j.Ad)
		}
		i++
	}
}

// BenchmarkRunComplete takes jobs of one big cluster through Running and
// Completed (to history), as the schedd does as each starts and ends: two
// transactions a job.
func BenchmarkRunComplete(b *testing.B) {
	q := benchQueue(b, "NORMAL")
	ctx := context.Background()
	cluster, err := q.Submit(ctx, realistic(b, b.N))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	defer func() { b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/job") }()
	for i := range b.N {
		id := JobID{Cluster: cluster, Proc: i}
		if err := q.Transition(ctx, id, Running, Ad{"RemoteHost": `"slot1@node"`}); err != nil {
			b.Fatal(err)
		}
		if err := q.Transition(ctx, id, Completed, Ad{"ExitCode": "0"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitClusters200 stores 200 clusters of one job each in one
// transaction, as a DAG manager's batch of ready nodes is stored.
func BenchmarkSubmitClusters200(b *testing.B) {
	q := benchQueue(b, "NORMAL")
	job := realistic(b, 1)[0]
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clusters, err := q.NewClusters(ctx, 200)
		if err != nil {
			b.Fatal(err)
		}
		cs := make([]ClusterSubmit, len(clusters))
		for i, c := range clusters {
			cs[i] = ClusterSubmit{Cluster: c, Jobs: []Ad{job}}
		}
		if _, err := q.SubmitClusters(ctx, cs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(200*b.N), "us/cluster")
}

// BenchmarkEndsTogether ends jobs from 8 goroutines at once, as the schedd
// does as many slots' jobs end: each job completed (kept in the queue)
// and then moved to the history with RetireDelivered, whose calls made
// together share a transaction.
func BenchmarkEndsTogether(b *testing.B) {
	q := benchQueue(b, "NORMAL")
	ctx := context.Background()
	cluster, err := q.Submit(ctx, realistic(b, b.N))
	if err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if err := q.Transition(ctx, JobID{Cluster: cluster, Proc: i}, Running, Ad{"RemoteHost": `"slot1@node"`}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	cpu0 := cpuTime(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				id := JobID{Cluster: cluster, Proc: i}
				if err := q.Apply(ctx, []Change{{ID: id, To: Completed, Attrs: Ad{"ExitCode": "0"}, Keep: true}}); err != nil {
					b.Error(err)
					return
				}
				if err := q.RetireDelivered(ctx, []JobID{id}, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
	n, err := q.History(ctx, HistoryQuery{Sel: ClusterJobs(cluster), Limit: b.N + 1})
	if err != nil || len(n) != b.N {
		b.Fatalf("%d jobs in the history, want %d: %v", len(n), b.N, err)
	}
}

// BenchmarkJobsTogether runs jobs through the queue from many goroutines
// at once, as the schedd does when many slots' jobs start and end: each
// job moved to Running with an outbox record, completed (kept in the
// queue) with another, then moved to the history with RetireDelivered. It
// reports the CPU and the commits a job costs; with many at once, the
// changes share commits (group.go).
func BenchmarkJobsTogether(b *testing.B) {
	for _, workers := range []int{8, 512} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchJobsTogether(b, workers) })
	}
}

func benchJobsTogether(b *testing.B, workers int) {
	var commits atomic.Int64
	q, err := OpenWith(context.Background(), filepath.Join(b.TempDir(), "q.db"), Options{OnCommit: func(time.Duration) { commits.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	ctx := context.Background()
	cluster, err := q.Submit(ctx, realistic(b, b.N))
	if err != nil {
		b.Fatal(err)
	}
	record := func(JobID, Status, Status) []byte { return []byte(`{"type":"event"}`) }
	b.ResetTimer()
	cpu0, commits0 := cpuTime(b), commits.Load()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				id := JobID{Cluster: cluster, Proc: i}
				start := &Outbox{Record: record}
				if err := q.Transition(WithOutbox(ctx, start), id, Running, Ad{"RemoteHost": `"slot1@node"`}); err != nil {
					b.Error(err)
					return
				}
				end := &Outbox{Record: record}
				if err := q.Apply(WithOutbox(ctx, end), []Change{{ID: id, To: Completed, Attrs: Ad{"ExitCode": "0"}, Keep: true}}); err != nil {
					b.Error(err)
					return
				}
				if err := q.RetireDelivered(ctx, []JobID{id}, []int64{start.Entries[0].Seq, end.Entries[0].Seq}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
	b.ReportMetric(float64(commits.Load()-commits0)/float64(b.N), "commits/job")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	n, err := q.History(ctx, HistoryQuery{Sel: ClusterJobs(cluster), Limit: b.N + 1})
	if err != nil || len(n) != b.N {
		b.Fatalf("%d jobs in the history, want %d: %v", len(n), b.N, err)
	}
}
