package jobqueue

import (
	"context"
	"path/filepath"
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
