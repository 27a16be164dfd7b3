package schedd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// BenchmarkAct holds, releases and removes a cluster of
// POND_BENCH_ACT_JOBS idle jobs (default 20,000) a schedd has with one
// condor_hold, condor_release and condor_rm each, and reports each
// action's time and the CPU time it used per job (which, unlike the
// wall-clock time, load on the machine barely changes).
func BenchmarkAct(b *testing.B) {
	n := 20000
	if v := os.Getenv("POND_BENCH_ACT_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("POND_BENCH_ACT_JOBS=%q: want a positive number of jobs", v)
		}
	}
	ctx := context.Background()
	s := scheddAt(b, b.TempDir(), "")
	b.Cleanup(func() { s.Close() })
	actions := []string{wire.ActHold, wire.ActRelease, wire.ActRemove}
	wall := map[string]time.Duration{}
	cpu := map[string]time.Duration{}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c := submitCluster(b, s, n)
		b.StartTimer()
		for _, action := range actions {
			start, cpu0 := time.Now(), processCPU()
			resp, err := s.Act(ctx, &wire.ActRequest{Action: action, Args: []string{fmt.Sprint(c)}})
			if err != nil {
				b.Fatal(err)
			}
			wall[action] += time.Since(start)
			cpu[action] += processCPU() - cpu0
			if resp.Count != n {
				b.Fatalf("%s changed %d jobs, want %d", action, resp.Count, n)
			}
		}
	}
	for _, action := range actions {
		b.ReportMetric(wall[action].Seconds()/float64(b.N), action+"-s")
		b.ReportMetric(float64(cpu[action].Microseconds())/float64(b.N*n), action+"-cpu-µs/job")
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
