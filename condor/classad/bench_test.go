package classad

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time this process has used, so figures stay
// meaningful on a machine shared with other work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op and evals/cpu-s metrics.
func reportCPU(b *testing.B, start time.Duration) {
	d := cpuTime() - start
	if d <= 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/d.Seconds(), "evals/cpu-s")
}

const (
	benchRequirements = `TARGET.Memory >= MY.RequestMemory && TARGET.Arch == "X86_64" && regexp("\\.edu$", TARGET.Machine)`
	benchMachineAd    = `MyType = "Machine"
TargetType = "Job"
Name = "slot1@node17.cs.wisc.edu"
Machine = "node17.cs.wisc.edu"
Arch = "X86_64"
OpSys = "LINUX"
Memory = 16384
Disk = 104857600
Cpus = 8
KeyboardIdle = 1200
LoadAvg = 0.05
State = "Unclaimed"
Activity = "Idle"
HasMatlab = true
Start = true
Requirements = START && TARGET.RequestMemory <= MY.Memory
Rank = TARGET.Owner == "alice" ? 10 : 0
`
	benchJobAd = `MyType = "Job"
Owner = "alice"
Cmd = "/bin/sleep"
RequestMemory = 2048
RequestCpus = 1
Requirements = TARGET.Memory >= MY.RequestMemory && TARGET.Arch == "X86_64" && regexp("\.edu$", TARGET.Machine)
Rank = TARGET.Memory
`
)

func benchAds(tb testing.TB) (job, machine *Ad) {
	tb.Helper()
	job, err := ParseOldAd(benchJobAd)
	if err != nil {
		tb.Fatal(err)
	}
	machine, err = ParseOldAd(benchMachineAd)
	if err != nil {
		tb.Fatal(err)
	}
	return job, machine
}

func BenchmarkParseExpr(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseExpr(benchRequirements); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseOldAd(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMachineAd)))
	for b.Loop() {
		if _, err := ParseOldAd(benchMachineAd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequirements is the SPEC target: a typical job Requirements
// against a machine ad, compiled once.
func BenchmarkRequirements(b *testing.B) {
	job, machine := benchAds(b)
	p, err := Compile(benchRequirements)
	if err != nil {
		b.Fatal(err)
	}
	if !p.EvalBool(job, machine) {
		b.Fatal("requirements do not hold")
	}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if !p.EvalBool(job, machine) {
			b.Fatal("no match")
		}
	}
	reportCPU(b, start)
}

func BenchmarkRequirementsParallel(b *testing.B) {
	job, machine := benchAds(b)
	p, err := Compile(benchRequirements)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !p.EvalBool(job, machine) {
				b.Error("no match")
				return
			}
		}
	})
}

func BenchmarkSymmetricMatch(b *testing.B) {
	job, machine := benchAds(b)
	m := NewMatcher(job)
	if !m.SymmetricMatch(machine) {
		b.Fatal("ads do not match")
	}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if !m.SymmetricMatch(machine) {
			b.Fatal("no match")
		}
	}
	reportCPU(b, start)
}

func BenchmarkMatchAndRank(b *testing.B) {
	job, machine := benchAds(b)
	b.ReportAllocs()
	for b.Loop() {
		if !Match(job, machine) {
			b.Fatal("no match")
		}
		_ = Rank(job, machine)
		_ = Rank(machine, job)
	}
}

// BenchmarkAdCopy copies a job ad, as the daemons copy the ads they
// change.
func BenchmarkAdCopy(b *testing.B) {
	job, _ := benchAds(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = job.Copy()
	}
}
