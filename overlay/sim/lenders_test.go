package sim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

var lendersFigures = flag.Bool("sim.lenders", false, "regenerate docs/sim/lenders.csv (four pools, D overloaded: no flocking, flocking, lenders first)")

// lendersModes are the three runs of the lenders table.
var lendersModes = []string{"no flocking", "flocking", "lenders first"}

// lendersConfig is four pools of 10 slots in the shape of the flock
// paper's measurement: A and B lightly loaded and lending, C outside the
// flock, D overloaded by a burst of jobs on top of its own load; jobs of
// an hour on average arrive for 12 hours.
func lendersConfig(mode string, seed uint64) LendersConfig {
	return LendersConfig{
		Pools: []LendersPool{
			{Name: "A", Slots: 10, Load: 0.5, Flocks: true},
			{Name: "B", Slots: 10, Load: 0.5, Flocks: true},
			{Name: "C", Slots: 10, Load: 0.5},
			{Name: "D", Slots: 10, Load: 0.8, Burst: 60, Flocks: true},
		},
		Runtime: time.Hour, Arrivals: 12 * time.Hour, Step: time.Minute, IdleTime: time.Minute,
		Flock: mode != "no flocking", LendersFirst: mode == "lenders first", Seed: seed,
	}
}

// TestLendersSim checks the lenders table's orders over several seeds:
// flocking cuts the overloaded pool D's worst wait by half or more; the
// lenders A and B wait longer when they lend, and less with lenders first
// than without; C, outside the flock, is untouched; every job ends.
func TestLendersSim(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		var reps [][]LendersPoolReport
		for _, m := range lendersModes {
			r, err := Lenders(lendersConfig(m, seed))
			if err != nil {
				t.Fatal(err)
			}
			reps = append(reps, r)
		}
		none, fl, lf := reps[0], reps[1], reps[2]
		for i := range none {
			t.Logf("seed %d %s: none %v/%v, flocking %v/%v, lenders first %v/%v (preempted %d, lost %v)", seed, none[i].Name,
				none[i].MeanWait.Round(time.Second), none[i].MaxWait.Round(time.Second),
				fl[i].MeanWait.Round(time.Second), fl[i].MaxWait.Round(time.Second),
				lf[i].MeanWait.Round(time.Second), lf[i].MaxWait.Round(time.Second), lf[i].Preempted, lf[i].Lost.Round(time.Minute))
		}
		const d = 3
		if fl[d].MaxWait*2 > none[d].MaxWait || lf[d].MaxWait*2 > none[d].MaxWait {
			t.Errorf("seed %d: D's worst wait: none %v, flocking %v, lenders first %v", seed, none[d].MaxWait, fl[d].MaxWait, lf[d].MaxWait)
		}
		for _, l := range []int{0, 1} {
			// Lenders first costs a lender at most about a cycle.
			if lf[l].MeanWait > none[l].MeanWait+time.Minute {
				t.Errorf("seed %d: lender %s waits %v with lenders first, %v without flocking", seed, none[l].Name, lf[l].MeanWait, none[l].MeanWait)
			}
			if lf[l].MeanWait > fl[l].MeanWait {
				t.Errorf("seed %d: lender %s waits %v with lenders first, %v without", seed, none[l].Name, lf[l].MeanWait, fl[l].MeanWait)
			}
			if none[l].Preempted+fl[l].Preempted+lf[l].Preempted != 0 {
				t.Errorf("seed %d: lender %s's jobs were preempted", seed, none[l].Name)
			}
		}
		if none[2] != fl[2] || none[2] != lf[2] {
			t.Errorf("seed %d: C changed with flocking: %+v, %+v", seed, none[2], fl[2])
		}
		if fl[d].Preempted != 0 || lf[d].Preempted == 0 {
			t.Errorf("seed %d: D's jobs preempted: flocking %d, lenders first %d", seed, fl[d].Preempted, lf[d].Preempted)
		}
	}
	if _, err := Lenders(LendersConfig{Pools: []LendersPool{{Name: "A", Slots: 1}}}); err == nil {
		t.Error("one pool: no error")
	}
}

// TestLendersFigures regenerates docs/sim/lenders.csv with -sim.lenders.
func TestLendersFigures(t *testing.T) {
	if !*lendersFigures {
		t.Skip("regenerate with -sim.lenders")
	}
	var reps [][]LendersPoolReport
	for _, m := range lendersModes {
		r, err := Lenders(lendersConfig(m, 1))
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	var buf bytes.Buffer
	if err := WriteLendersCSV(&buf, lendersModes, reps); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docsDir, "lenders.csv"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLendersJobs checks the workload a real flock can replay: the same
// jobs whatever the mode, the ones Lenders counts, a burst at 0 first,
// arrivals within the arrival time and in step order.
func TestLendersJobs(t *testing.T) {
	var first []LendersJob
	for _, m := range lendersModes {
		cfg := lendersConfig(m, 1)
		jobs, err := LendersJobs(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = jobs
		} else if !reflect.DeepEqual(jobs, first) {
			t.Errorf("%s: the workload changed with the mode", m)
		}
		reps, err := Lenders(cfg)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]int, len(cfg.Pools))
		for _, j := range jobs {
			counts[j.Pool]++
		}
		for i, r := range reps {
			if r.Jobs != counts[i] {
				t.Errorf("%s: pool %s ran %d jobs, the workload has %d", m, r.Name, r.Jobs, counts[i])
			}
		}
	}
	d := lendersConfig("", 1).Pools[3].Burst
	for k, j := range first {
		switch {
		case k < d:
			if j.Pool != 3 || j.Arrival != 0 || j.step != -1 {
				t.Errorf("job %d: %+v, want D's burst", k, j)
			}
		case j.step < 0 || j.Arrival <= time.Duration(j.step-1)*time.Minute || j.Arrival > time.Duration(j.step)*time.Minute:
			t.Errorf("job %d arrives at %v in step %d", k, j.Arrival, j.step)
		case k > 0 && j.step < first[k-1].step:
			t.Errorf("job %d of step %d after one of step %d", k, j.step, first[k-1].step)
		}
		if j.Runtime <= 0 {
			t.Errorf("job %d runs %v", k, j.Runtime)
		}
	}
	if last := first[len(first)-1]; last.Arrival >= 12*time.Hour {
		t.Errorf("a job arrives at %v, after the arrivals", last.Arrival)
	}
	if _, err := LendersJobs(LendersConfig{Pools: []LendersPool{{Name: "A", Slots: 1}, {Name: "B"}}, Step: time.Minute, Runtime: time.Hour}); err == nil {
		t.Error("a pool of no slot: no error")
	}
}
