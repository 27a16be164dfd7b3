package planner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// benchHarness applies src once, then returns a harness whose state holds
// every resource, ready for plans.
func benchHarness(b *testing.B, src string) *harness {
	b.Helper()
	h := newHarness(b)
	if err := os.WriteFile(filepath.Join(h.dir, "main.pond.hcl"), []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	if _, _, err := h.apply(planner.PlanOptions{Parallelism: 10}); err != nil {
		b.Fatal(err)
	}
	return h
}

func independentConfig(n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "pool \"p%d\" {\n  nodes = %d\n  labels = { site = \"s%d\" }\n}\n", i, 1+i%4, i%10)
	}
	return sb.String()
}

func chainConfig(n int) string {
	var sb strings.Builder
	sb.WriteString("pool \"c0\" {}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&sb, "pool \"c%d\" {\n  labels = { prev = pool.c%d.id }\n}\n", i, i-1)
	}
	return sb.String()
}

// benchPlan measures a whole "pondctl plan -refresh=false" against a stored
// state: loading the configuration, reading the state document, planning.
func benchPlan(b *testing.B, src string) {
	// The garbage collector settings pondctl uses for its commands
	// (cmd/internal/cli tuneGC).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(450 << 20))
	h := benchHarness(b, src)
	data, err := state.Encode(h.state)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data)), "state-bytes")
	b.ReportAllocs()
	b.ResetTimer()
	var ms runtime.MemStats
	peak := uint64(0)
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		n++
		s, err := state.Decode(data, "bench")
		if err != nil {
			b.Fatal(err)
		}
		h.state = s
		e, err := h.engine()
		if err != nil {
			b.Fatal(err)
		}
		p, diags := e.Plan(context.Background(), h.state, planner.PlanOptions{})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if p.HasChanges() {
			b.Fatal("plan of an applied configuration has changes")
		}
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak {
			peak = ms.HeapInuse
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "heap-MiB")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(n), "cpu-s/op")
}

// cpuTime is the CPU time (user and system) the process has used, a steadier
// measure than wall time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkPlan10000Independent(b *testing.B) { benchPlan(b, independentConfig(10000)) }

func BenchmarkPlan1000Chain(b *testing.B) { benchPlan(b, chainConfig(1000)) }

// TestChainStateIsLinear checks that the state of a dependency chain grows
// linearly: each instance records only its direct dependency.
func TestChainStateIsLinear(t *testing.T) {
	size := func(n int) int {
		h := newHarness(t)
		h.write(chainConfig(n))
		if _, _, err := h.apply(planner.PlanOptions{}); err != nil {
			t.Fatal(err)
		}
		data, err := state.Encode(h.state)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range h.state.Resources {
			if deps := r.Instances[0].Dependencies; len(deps) > 1 {
				t.Fatalf("%s records %d dependencies, want at most 1", r.Name, len(deps))
			}
		}
		return len(data)
	}
	small, large := size(50), size(500)
	if ratio := float64(large) / float64(small); ratio > 11 {
		t.Fatalf("state of a 500-chain is %.1f times that of a 50-chain; want about 10 (linear)", ratio)
	}
}
