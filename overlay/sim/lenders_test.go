package sim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
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
