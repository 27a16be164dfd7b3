package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"time"
)

// LendersPool is one pool of a lenders simulation.
type LendersPool struct {
	Name  string
	Slots int
	// Load is the steady arrival rate, as a fraction of the pool's
	// capacity (1 keeps every slot busy on average).
	Load float64
	// Burst jobs arrive at once at the start.
	Burst int
	// Flocks says whether the pool takes part in the flock: its waiting
	// jobs flock to the other such pools, and it lends them its idle
	// slots.
	Flocks bool
}

// LendersConfig describes a few pools flocking, with or without lenders
// first.
type LendersConfig struct {
	Pools []LendersPool
	// Runtime is the mean job runtime (exponential); Arrivals how long
	// jobs arrive (the simulation then runs until every job ended); Step
	// the time step, a negotiation cycle.
	Runtime, Arrivals, Step time.Duration
	// IdleTime is FLOCK_IDLE_TIME.
	IdleTime time.Duration
	// Flock turns flocking on; LendersFirst lets a pool's own idle jobs
	// preempt the jobs flocked into it, one per job, in the step they
	// find no free slot (the preempted job goes back to its pool's queue
	// and starts over).
	Flock, LendersFirst bool
	Seed                uint64
}

// LendersPoolReport is what a lenders simulation measured of one pool's
// jobs, wherever they ran.
type LendersPoolReport struct {
	Name string
	Jobs int
	// MeanWait and MaxWait are the jobs' time idle, from arrival to the
	// start that ran them to the end, less the time they ran before a
	// preemption.
	MeanWait, MaxWait time.Duration
	// Flocked counts the runs started in another pool; Preempted the
	// runs of the pool's jobs that were preempted, and Lost the run time
	// they lost.
	Flocked, Preempted int
	Lost               time.Duration
}

// LendersJob is one job of a lenders workload: the pool it is submitted
// to (an index into LendersConfig.Pools), when it arrives and how long it
// runs.
type LendersJob struct {
	Pool    int
	Arrival time.Duration
	Runtime time.Duration
	// step is the index of the time step that takes the arrival, -1
	// for the burst (taken before the first step).
	step int
}

// LendersJobs returns the jobs of cfg's workload, in the order the
// simulation draws them from cfg.Seed: each pool's burst at time 0, then,
// step by step, each pool's arrivals of the step (Poisson, at a uniform
// time within it; those of the first step arrive a little before 0). The
// sequence does not depend on Flock or LendersFirst, so that a real pool
// can run the same jobs (acceptance/TestFlockTable1).
func LendersJobs(cfg LendersConfig) ([]LendersJob, error) {
	if len(cfg.Pools) < 2 || cfg.Step <= 0 || cfg.Runtime <= 0 || cfg.Arrivals < 0 {
		return nil, fmt.Errorf("sim: lenders: want 2 pools or more and positive durations")
	}
	for _, p := range cfg.Pools {
		if p.Slots < 1 || p.Load < 0 || p.Burst < 0 {
			return nil, fmt.Errorf("sim: lenders: pool %s: want a slot or more, no negative load or burst", p.Name)
		}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c656e64))
	var jobs []LendersJob
	draw := func(i int, at time.Duration, step int) {
		jobs = append(jobs, LendersJob{Pool: i, Arrival: at, Runtime: time.Duration(rng.ExpFloat64() * float64(cfg.Runtime)), step: step})
	}
	for i, p := range cfg.Pools {
		for k := 0; k < p.Burst; k++ {
			draw(i, 0, -1)
		}
	}
	step := 0
	for now := time.Duration(0); now < cfg.Arrivals; now += cfg.Step {
		for i, p := range cfg.Pools {
			for k := poisson(rng, p.Load*float64(p.Slots)/cfg.Runtime.Seconds()*cfg.Step.Seconds()); k > 0; k-- {
				draw(i, now-time.Duration(rng.Float64()*float64(cfg.Step)), step)
			}
		}
		step++
	}
	return jobs, nil
}

// lendersJob is a job of a lenders simulation.
type lendersJob struct {
	owner     int
	run       time.Duration // its runtime
	arrived   time.Duration
	idleSince time.Duration
	waited    time.Duration
}

// lendersRun is a job running in a pool since start, until end.
type lendersRun struct {
	job        *lendersJob
	start, end time.Duration
}

// Lenders simulates cfg.Pools over time steps: each step every pool ends
// the runs that are over, takes its arrivals, starts its own oldest idle
// jobs in its free slots and then, with LendersFirst, in the slots of the
// youngest runs of flocked-in jobs; then, with Flock, the jobs of a pool
// that waited IdleTime start in the free slots of the other flocking
// pools, in the order the pools are given (the simulation has no
// distances). It runs until every job has ended.
func Lenders(cfg LendersConfig) ([]LendersPoolReport, error) {
	workload, err := LendersJobs(cfg)
	if err != nil {
		return nil, err
	}
	n := len(cfg.Pools)
	idle := make([][]*lendersJob, n) // oldest first
	running := make([][]lendersRun, n)
	reps := make([]LendersPoolReport, n)
	waits := make([][]time.Duration, n)
	left := 0
	type arrivals struct{ step, pool int }
	byStep := map[arrivals][]LendersJob{}
	for _, j := range workload {
		k := arrivals{j.step, j.Pool}
		byStep[k] = append(byStep[k], j)
	}
	arrive := func(step, i int) {
		for _, w := range byStep[arrivals{step, i}] {
			idle[i] = append(idle[i], &lendersJob{owner: i, run: w.Runtime, arrived: w.Arrival, idleSince: w.Arrival})
			reps[i].Jobs++
			left++
		}
	}
	for i, p := range cfg.Pools {
		reps[i].Name = p.Name
		arrive(-1, i)
	}
	start := func(q int, j *lendersJob, now time.Duration) {
		j.waited += now - j.idleSince
		running[q] = append(running[q], lendersRun{job: j, start: now, end: now + j.run})
		if q != j.owner {
			reps[j.owner].Flocked++
		}
	}
	requeue := func(j *lendersJob, now time.Duration) {
		j.idleSince = now
		o := j.owner
		// Back in its place: the queue stays in arrival order.
		k := sort.Search(len(idle[o]), func(k int) bool { return idle[o][k].arrived > j.arrived })
		idle[o] = append(idle[o], nil)
		copy(idle[o][k+1:], idle[o][k:])
		idle[o][k] = j
	}
	for now, step := time.Duration(0), 0; left > 0 || now < cfg.Arrivals; now, step = now+cfg.Step, step+1 {
		if now > cfg.Arrivals+1000*cfg.Runtime {
			return nil, fmt.Errorf("sim: lenders: %d jobs never ended", left)
		}
		for i, p := range cfg.Pools {
			kept := running[i][:0]
			for _, r := range running[i] {
				if r.end > now {
					kept = append(kept, r)
					continue
				}
				waits[r.job.owner] = append(waits[r.job.owner], r.job.waited)
				left--
			}
			running[i] = kept
			arrive(step, i)
			for len(idle[i]) > 0 && len(running[i]) < p.Slots {
				start(i, idle[i][0], now)
				idle[i] = idle[i][1:]
			}
			for cfg.LendersFirst && len(idle[i]) > 0 {
				// The youngest run of a flocked-in job gives way.
				y := -1
				for k, r := range running[i] {
					if r.job.owner != i && (y < 0 || r.start > running[i][y].start) {
						y = k
					}
				}
				if y < 0 {
					break
				}
				r := running[i][y]
				running[i] = append(running[i][:y], running[i][y+1:]...)
				reps[r.job.owner].Preempted++
				reps[r.job.owner].Lost += now - r.start
				requeue(r.job, now)
				start(i, idle[i][0], now)
				idle[i] = idle[i][1:]
			}
		}
		if !cfg.Flock {
			continue
		}
		for i, p := range cfg.Pools {
			if !p.Flocks {
				continue
			}
			for q, lender := range cfg.Pools {
				if q == i || !lender.Flocks {
					continue
				}
				for len(idle[i]) > 0 && now-idle[i][0].idleSince >= cfg.IdleTime && len(running[q]) < lender.Slots {
					start(q, idle[i][0], now)
					idle[i] = idle[i][1:]
				}
			}
		}
	}
	for i := range reps {
		w := waits[i]
		if len(w) == 0 {
			continue
		}
		var sum time.Duration
		for _, d := range w {
			sum += d
			reps[i].MaxWait = max(reps[i].MaxWait, d)
		}
		reps[i].MeanWait = sum / time.Duration(len(w))
	}
	return reps, nil
}

// WriteLendersCSV writes lenders simulation reports, one row per mode and
// pool.
func WriteLendersCSV(w io.Writer, modes []string, reps [][]LendersPoolReport) error {
	if _, err := fmt.Fprintln(w, "mode,pool,jobs,mean_wait_min,max_wait_min,flocked,preempted,lost_min"); err != nil {
		return err
	}
	for m, rs := range reps {
		for _, r := range rs {
			if _, err := fmt.Fprintf(w, "%s,%s,%d,%.1f,%.1f,%d,%d,%.1f\n", modes[m], r.Name, r.Jobs, r.MeanWait.Minutes(),
				r.MaxWait.Minutes(), r.Flocked, r.Preempted, r.Lost.Minutes()); err != nil {
				return err
			}
		}
	}
	return nil
}
