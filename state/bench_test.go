package state

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used. Reported per operation
// next to the wall time, it stays meaningful when the machine is busy with
// other work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU milliseconds per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

// bigState builds a state of n resources shaped like a large pond
// configuration: pools of a few instances, ponds and data queries, each
// with a few hundred bytes of attributes and one or two dependencies.
func bigState(n int) *State {
	s := New()
	for i := range n {
		var addr Address
		var deps []string
		switch i % 10 {
		case 0:
			addr = Address{Mode: ModeData, Type: "sea_query", Name: fmt.Sprintf("q%d", i)}
		case 1, 2, 3:
			addr = Address{Type: "pond", Name: fmt.Sprintf("p%d", i), Key: "burst"}
			deps = []string{fmt.Sprintf("pool.r%d", i-1), fmt.Sprintf("data.sea_query.q%d", i-i%10)}
		default:
			addr = Address{Type: "pool", Name: fmt.Sprintf("r%d", i), Key: i % 4}
			if i > 0 {
				deps = []string{fmt.Sprintf("pool.r%d", i-1)}
			}
		}
		id, _ := json.Marshal(addr.String())
		attrs := fmt.Sprintf(`{"id":%s,"nodes":4,"slots":2,"central_manager":"127.0.0.1:%d","attributes":{"HasMatlab":"true","Site":"campus"},"config":{"NEGOTIATOR_INTERVAL":"5"},"requirements":"Memory >= 1024 && HasMatlab =!= true","members":["node-%d-0","node-%d-1","node-%d-2","node-%d-3"]}`,
			id, 9000+i%1000, i, i, i, i)
		s.SetInstance(addr, "provider.local", &Instance{Attributes: json.RawMessage(attrs), Dependencies: deps})
	}
	s.Outputs["members"] = &Output{Value: json.RawMessage(`["a","b"]`), Type: json.RawMessage(`["list","string"]`)}
	return s
}

func BenchmarkEncode10k(b *testing.B) {
	s := bigState(10000)
	data, _ := Encode(s)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	start := cpuTime()
	defer reportCPU(b, start)
	for b.Loop() {
		if _, err := Encode(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode10k(b *testing.B) {
	data, err := Encode(bigState(10000))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	start := cpuTime()
	defer reportCPU(b, start)
	for b.Loop() {
		if _, err := Decode(data, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkContentEqual10k(b *testing.B) {
	s := bigState(10000)
	c := s.DeepCopy()
	b.ReportAllocs()
	start := cpuTime()
	defer reportCPU(b, start)
	for b.Loop() {
		if !ContentEqual(s, c) {
			b.Fatal("not equal")
		}
	}
}

func BenchmarkDeepCopy10k(b *testing.B) {
	s := bigState(10000)
	b.ReportAllocs()
	start := cpuTime()
	defer reportCPU(b, start)
	for b.Loop() {
		_ = s.DeepCopy()
	}
}

func BenchmarkIndex10k(b *testing.B) {
	s := bigState(10000)
	addrs := s.Addresses()
	b.ReportAllocs()
	start := cpuTime()
	defer reportCPU(b, start)
	for b.Loop() {
		x := NewIndex(s)
		for _, a := range addrs {
			if x.Instance(a) == nil {
				b.Fatal("missing")
			}
		}
	}
}

// BenchmarkHistoryChanges10k is the history's cost at each state write of
// an apply of 10,000 instances that changes one of them.
func BenchmarkHistoryChanges10k(b *testing.B) {
	before := bigState(10000)
	after := before.DeepCopy()
	after.Resources[0].Instances[0].Attributes = json.RawMessage(`{"id":"changed"}`)
	start := cpuTime()
	for b.Loop() {
		if c := Changes(before, after, HistoryHints{}); len(c) != 1 {
			b.Fatalf("%d changes, want 1", len(c))
		}
	}
	reportCPU(b, start)
}
