package sim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var flockFigures = flag.Bool("sim.flock", false, "regenerate docs/sim/flock.csv and paper_flock_fig6.csv (1,000 pools flocking, three modes; the locality of the jobs)")

// localityWithin are the distances, as fractions of the sea's diameter,
// at which paper_flock_fig6.csv gives the share of jobs run that near.
func localityWithin() []float64 {
	var out []float64
	for i := 0; i <= 100; i++ {
		out = append(out, float64(i)/100)
	}
	return out
}

func flockConfig(pools int, mode FlockMode) FlockConfig {
	return FlockConfig{Pools: pools, Overloaded: 0.2, Runtime: 10 * time.Minute, Duration: 6 * time.Hour,
		Step: 10 * time.Second, IdleTime: 10 * time.Second, Mode: mode, Seed: 1}
}

// TestFlockSim simulates 200 pools, a fifth of them overloaded: flocking
// cuts the jobs' wait, and flocking nearest first sends the jobs over
// shorter round trips than flocking in a random order, at about the same
// wait.
func TestFlockSim(t *testing.T) {
	reps := map[FlockMode]*FlockReport{}
	for _, m := range []FlockMode{FlockNone, FlockNearest, FlockRandom} {
		r, err := Flock(flockConfig(200, m))
		if err != nil {
			t.Fatal(err)
		}
		reps[m] = r
		t.Logf("%s: %d jobs, %d flocked, mean wait %v, mean RTT %v, %d unstarted", r.Mode, r.Jobs, r.Flocked, r.MeanWait, r.MeanRTT, r.Unstarted)
	}
	none, near, random := reps[FlockNone], reps[FlockNearest], reps[FlockRandom]
	if none.Flocked != 0 || near.Flocked == 0 || random.Flocked == 0 {
		t.Fatalf("flocked: none %d, nearest %d, random %d", none.Flocked, near.Flocked, random.Flocked)
	}
	if near.MeanWait >= none.MeanWait/4 || near.Unstarted >= none.Unstarted/4 {
		t.Errorf("flocking nearest first: wait %v, %d unstarted; without flocking %v, %d", near.MeanWait, near.Unstarted, none.MeanWait, none.Unstarted)
	}
	if near.MeanRTT >= random.MeanRTT*3/4 {
		t.Errorf("mean RTT of flocked jobs: nearest first %v, random %v", near.MeanRTT, random.MeanRTT)
	}
	// Every job started has its distance, 0 for those run at home, and
	// nearest first keeps the flocked ones near: most within a fifth of
	// the diameter, twice the share of a random order or more.
	for _, r := range []*FlockReport{none, near, random} {
		if len(r.Distances) != r.Jobs {
			t.Errorf("%s: %d distances for %d jobs", r.Mode, len(r.Distances), r.Jobs)
		}
	}
	if p := Locality(none, []float64{0})[0]; p.All != 1 {
		t.Errorf("without flocking %.3f of the jobs ran at home, want all", p.All)
	}
	n20, r20 := Locality(near, []float64{0.2})[0], Locality(random, []float64{0.2})[0]
	t.Logf("flocked jobs within 20%% of the diameter: nearest first %.3f, random %.3f", n20.Flocked, r20.Flocked)
	if n20.Flocked < 0.5 || n20.Flocked < 2*r20.Flocked {
		t.Errorf("flocked jobs within 20%% of the diameter: nearest first %.3f, random %.3f", n20.Flocked, r20.Flocked)
	}
	if _, err := Flock(FlockConfig{Pools: 1}); err == nil {
		t.Error("one pool: no error")
	}
}

// TestFlockFigures regenerates docs/sim/flock.csv and the locality of the
// flocked jobs, docs/sim/paper_flock_fig6.csv, with -sim.flock.
func TestFlockFigures(t *testing.T) {
	if !*flockFigures {
		t.Skip("regenerate with -sim.flock")
	}
	var reps []*FlockReport
	var locality []LocalityPoint
	for _, m := range []FlockMode{FlockNone, FlockNearest, FlockRandom} {
		r, err := Flock(flockConfig(1000, m))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d jobs, %d flocked, mean wait %v, mean RTT %v, %d unstarted", r.Mode, r.Jobs, r.Flocked, r.MeanWait, r.MeanRTT, r.Unstarted)
		reps = append(reps, r)
		if m != FlockNone {
			locality = append(locality, Locality(r, localityWithin())...)
		}
	}
	var loc bytes.Buffer
	if err := WriteLocalityCSV(&loc, locality); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docsDir, "paper_flock_fig6.csv"), loc.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFlockCSV(&buf, reps); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docsDir, "flock.csv"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
