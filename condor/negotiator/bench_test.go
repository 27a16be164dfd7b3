package negotiator

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

// benchPool builds nSlots static slot ads on nMachines-style hosts and
// nClusters autoclusters of jobsPer jobs each, with requirements and ranks
// like those condor_submit and a startd produce.
func benchPool(tb testing.TB, nSlots, nClusters, jobsPer int, sharedFS bool) ([]*Slot, []Submitter) {
	tb.Helper()
	slots := make([]*Slot, nSlots)
	for i := range slots {
		ad, err := classad.ParseOldAd(fmt.Sprintf(`MyType = "Machine"
Name = "slot1@node%05d"
Machine = "node%05d"
Arch = "X86_64"
OpSys = "LINUX"
Cpus = %d
Memory = %d
Disk = 100000000
HasFileTransfer = true
FileSystemDomain = "%s"
KeyboardIdle = 1200
LoadAvg = 0.1
State = "Unclaimed"
Activity = "Idle"
PartitionableSlot = false
Start = true
Requirements = START && TARGET.RequestMemory <= MY.Memory
Rank = 0
`, i, i, 1+i%8, 1024*(1+i%32), fsDomain(i, sharedFS)))
		if err != nil {
			tb.Fatal(err)
		}
		slots[i] = NewSlot(ad, "127.0.0.1:1", fmt.Sprint("claim", i))
	}
	var subs []Submitter
	for u := 0; u < 4; u++ {
		sub := Submitter{Name: fmt.Sprintf("user%d@pond", u), Schedd: "127.0.0.1:2", Priority: 500 * float64(u+1)}
		for c := u; c < nClusters; c += 4 {
			for p := 0; p < jobsPer; p++ {
				ad, err := classad.ParseOldAd(fmt.Sprintf(`MyType = "Job"
Owner = "user%d"
ClusterId = %d
ProcId = %d
RequestCpus = 1
RequestMemory = %d
RequestDisk = 1024
Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && ((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))
Rank = %s
FileSystemDomain = "submit"
`, u, c+1, p, 128*(1+c%64), map[bool]string{true: "TARGET.Memory", false: "0.0"}[c%2 == 0]))
				if err != nil {
					tb.Fatal(err)
				}
				sub.Jobs = append(sub.Jobs, Job{ID: fmt.Sprintf("%d.%d", c+1, p), Ad: ad})
			}
		}
		subs = append(subs, sub)
	}
	return slots, subs
}

func fsDomain(i int, shared bool) string {
	if shared {
		return "pool.example"
	}
	return fmt.Sprintf("node%05d", i)
}

// BenchmarkCycle10kSlots1kAutoclusters is one matchmaking pass over 10,000
// slots for 1,000 autoclusters (5 idle jobs each), half of them ranking
// machines by memory, so that every autocluster scans every slot.
// The slots share a FILESYSTEM_DOMAIN, as in a pool configured with one.
func BenchmarkCycle10kSlots1kAutoclusters(b *testing.B) {
	benchCycle(b, true)
}

// BenchmarkCycle10kSlots1kAutoclustersPerHostFS is the same with every slot
// in its own file system domain (HTCondor's default, the host name): no two
// slots look alike to the jobs' default Requirements, the worst case.
func BenchmarkCycle10kSlots1kAutoclustersPerHostFS(b *testing.B) {
	benchCycle(b, false)
}

// BenchmarkCycle10kSlots1kAutoclustersDefaultJobRanks is the first with
// HTCondor's default NEGOTIATOR_PRE_JOB_RANK and NEGOTIATOR_POST_JOB_RANK,
// which read the slots' Rank, Cpus, Memory and SlotID.
func BenchmarkCycle10kSlots1kAutoclustersDefaultJobRanks(b *testing.B) {
	benchCycleRanked(b, true, JobRanks{Pre: classad.MustParseExpr(DefaultPreJobRank), Post: classad.MustParseExpr(DefaultPostJobRank)})
}

func benchCycle(b *testing.B, sharedFS bool) {
	benchCycleRanked(b, sharedFS, JobRanks{})
}

func benchCycleRanked(b *testing.B, sharedFS bool, ranks JobRanks) {
	slots, subs := benchPool(b, 10000, 1000, 5, sharedFS)
	b.ResetTimer()
	var matches int
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, s := range slots {
			s.taken = false
		}
		b.StartTimer()
		matches = len(MatchmakeRanked(slots, subs, ranks))
	}
	// CPU time (all threads) is steadier than the elapsed time on a
	// machine shared with other work.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N), "cpu-ms/cycle")
	b.ReportMetric(float64(matches), "matches")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
}

// cpuTime returns the CPU time the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestMatchmakeRankAndFairShare(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharedFS=%v", shared), func(t *testing.T) { testMatchmake(t, shared) })
	}
}

func testMatchmake(t *testing.T, shared bool) {
	slots, subs := benchPool(t, 40, 8, 10, shared)
	for _, s := range slots {
		s.cpus = 1
	}
	ms := Matchmake(slots, subs)
	if len(ms) != 40 {
		t.Fatalf("%d matches for 40 slots and 80 jobs", len(ms))
	}
	per := map[string]int{}
	for _, m := range ms {
		per[m.Submitter]++
		if !classad.Match(m.Job.Ad, m.Slot.Ad) {
			t.Errorf("job %s matched slot %s that it does not match", m.Job.ID, m.Slot.Name)
		}
	}
	// Priorities 500, 1000, 1500, 2000: pie slices 19.2, 9.6, 6.4 and 4.8
	// of 40 slots, rounded up, served best priority first.
	want := map[string]int{"user0@pond": 20, "user1@pond": 10, "user2@pond": 7, "user3@pond": 3}
	for u, n := range want {
		if per[u] != n {
			t.Errorf("fair share: %v, want %v", per, want)
			break
		}
	}
	// Cluster 1 ranks by memory: its first job gets the biggest slot.
	for _, m := range ms {
		if m.Job.ID == "1.0" {
			if mem, _ := m.Slot.Ad.EvalAttr("Memory").IntValue(); mem < 128*1024/4 {
				t.Errorf("job 1.0 (Rank = TARGET.Memory) got a %d MB slot", mem)
			}
		}
	}
}
