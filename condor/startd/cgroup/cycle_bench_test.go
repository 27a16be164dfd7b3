package cgroup

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuNow is the process's user and system CPU time so far.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkJobCycle makes, reads and removes a job's cgroup, as the startd
// does for each job (without a process in it), and reports the CPU each
// cycle takes: one job after another, as a slot's jobs follow each other.
func BenchmarkJobCycle(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	m, err := Open("pond-bench/cycle-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	b.ResetTimer()
	cpu0 := cpuNow(b)
	for i := range b.N {
		g, err := m.Create("job"+strconv.Itoa(i), Limits{MemoryBytes: 64 << 20, MaxPids: 50, CPUs: 1})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.Stats(); err != nil {
			b.Fatal(err)
		}
		if err := g.Remove(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuNow(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
}
