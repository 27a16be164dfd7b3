package sim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var flockFigures = flag.Bool("sim.flock", false, "regenerate docs/sim/flock.csv (1,000 pools flocking, three modes)")

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
		t.Logf("%+v", *r)
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
	if _, err := Flock(FlockConfig{Pools: 1}); err == nil {
		t.Error("one pool: no error")
	}
}

// TestFlockFigures regenerates docs/sim/flock.csv with -sim.flock.
func TestFlockFigures(t *testing.T) {
	if !*flockFigures {
		t.Skip("regenerate with -sim.flock")
	}
	var reps []*FlockReport
	for _, m := range []FlockMode{FlockNone, FlockNearest, FlockRandom} {
		r, err := Flock(flockConfig(1000, m))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", *r)
		reps = append(reps, r)
	}
	var buf bytes.Buffer
	if err := WriteFlockCSV(&buf, reps); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docsDir, "flock.csv"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
