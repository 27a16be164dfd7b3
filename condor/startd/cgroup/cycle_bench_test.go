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

// BenchmarkJobCycle readies, reads and ends a job's cgroup, as the startd
// does for each job (without a process in it), and reports the CPU each
// cycle takes: one job after another, as a slot's jobs follow each other.
// new makes a cgroup for each job and removes it after (Create, Remove);
// kept keeps the slot's last job's for the next (Acquire, Release).
func BenchmarkJobCycle(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	m, err := Open("pond-bench/cycle-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	lim := Limits{MemoryBytes: 64 << 20, MaxPids: 50, CPUs: 1}
	for _, c := range []struct {
		name  string
		start func(name string) (*Group, error)
		end   func(*Group) error
	}{
		{"new", func(name string) (*Group, error) { return m.Create(name, lim) }, (*Group).Remove},
		{"kept", func(name string) (*Group, error) { return m.Acquire("slot1", lim) }, func(g *Group) error { return g.Release() }},
	} {
		b.Run(c.name, func(b *testing.B) {
			cpu0 := cpuNow(b)
			for i := range b.N {
				g, err := c.start("job" + strconv.Itoa(i))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := g.Stats(); err != nil {
					b.Fatal(err)
				}
				if err := c.end(g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuNow(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
		})
	}
}
