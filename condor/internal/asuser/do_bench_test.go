package asuser

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDo measures a function run with another account's rights: a
// thread started, its credentials changed, and ended, a call.
func BenchmarkDo(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("acting as another user needs root")
	}
	a := &Account{Name: "nobody", UID: 65534, GID: 65534}
	defer reportCPU(b)()
	for b.Loop() {
		if err := Do(a, func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU reports, when the function it returns is called, the
// process's CPU time per op since.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-c0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	}
}

// BenchmarkThreadsDo is BenchmarkDo on a thread kept for the account.
func BenchmarkThreadsDo(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("acting as another user needs root")
	}
	a := &Account{Name: "nobody", UID: 65534, GID: 65534}
	th := NewThreads(time.Minute)
	defer th.Close()
	defer reportCPU(b)()
	for b.Loop() {
		if err := th.Do(a, func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
