package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/flock"
)

// FlockMode is how a simulated pool orders the pools it flocks to.
type FlockMode string

// Flock modes.
const (
	// FlockNone never flocks: every pool runs its own jobs only.
	FlockNone FlockMode = "none"
	// FlockNearest flocks to the willing pools nearest first, as pond
	// does (flock.Willing).
	FlockNearest FlockMode = "nearest"
	// FlockRandom flocks to the willing pools in a random order: the
	// same policy without proximity.
	FlockRandom FlockMode = "random"
)

// FlockConfig describes a simulated sea of pools flocking to each other.
type FlockConfig struct {
	Pools int
	// Overloaded is the fraction of pools whose jobs arrive faster than
	// their slots run them (load 1.5); the others run at load 0.4.
	Overloaded float64
	// Runtime is the mean job runtime (exponential); Duration how long
	// the simulation runs; Step its time step, the announcement interval.
	Runtime, Duration, Step time.Duration
	// IdleTime is FLOCK_IDLE_TIME: a job idle that long may flock, and
	// the next pool is added after it too (FLOCK_INCREMENT 1).
	IdleTime time.Duration
	Mode     FlockMode
	Seed     uint64
}

// FlockReport is what a flock simulation measured.
type FlockReport struct {
	Mode      FlockMode
	Pools     int
	Jobs      int           // jobs started
	Flocked   int           // of those, started in another pool
	MeanWait  time.Duration // from arrival to start
	P95Wait   time.Duration
	MeanRTT   time.Duration // between a flocked job's pool and where it ran
	Unstarted int           // jobs still idle at the end
	// Distances holds, for every job started, how far from its own pool
	// it ran, as a fraction of the sea's diameter (the unit square's
	// diagonal): 0 for a job run in its own pool.
	Distances []float64
}

type simPool struct {
	slots, busy int
	lambda      float64         // arrivals per second
	idle        []time.Duration // arrival times of idle jobs, oldest first
	ends        []time.Duration // end times of running jobs
	x, y        float64         // position: RTT grows with distance
	order       []int           // the willing pools, in this pool's order
	flocked     int             // how many of order it flocks to
	lastAdd     time.Duration   // when it last added a pool
	announced   int             // idle slots at the last announcement
	rtts        map[int]float64 // RTT in seconds to the pools in order
}

// rtt is the simulated round trip between two pools: 50 ms plus up to
// 250 ms across the unit square, as the tree simulations' edges.
func rtt(a, b *simPool) float64 {
	return 0.050 + 0.250*distance(a, b)
}

// distance is how far apart two pools are, as a fraction of the sea's
// diameter, the unit square's diagonal.
func distance(a, b *simPool) float64 {
	return math.Hypot(a.x-b.x, a.y-b.y) / math.Sqrt2
}

// Flock simulates cfg.Pools pools flocking under cfg.Mode. Every pool
// announces its idle slots each step; a pool whose jobs waited IdleTime
// adds the next willing pool in its order (nearest first with
// FlockNearest, ranked by flock.Willing over the announcements with RTTs
// from the pools' positions), and its waiting jobs take the idle slots of
// the pools it flocks to, after their own jobs. Each job starts once.
func Flock(cfg FlockConfig) (*FlockReport, error) {
	if cfg.Pools < 2 || cfg.Step <= 0 || cfg.Duration < cfg.Step || cfg.Runtime <= 0 {
		return nil, fmt.Errorf("sim: flock: want 2 pools or more and positive durations")
	}
	r := &flockRun{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x666c6f636b)), rep: &FlockReport{Mode: cfg.Mode, Pools: cfg.Pools}}
	r.placePools()
	if cfg.Mode != FlockNone {
		if err := r.orderPools(); err != nil {
			return nil, err
		}
	}
	for now := time.Duration(0); now < cfg.Duration; now += cfg.Step {
		for _, p := range r.pools {
			r.runOwn(p, now)
		}
		if cfg.Mode != FlockNone {
			for _, p := range r.pools {
				r.runFlocked(p, now)
			}
		}
		for _, p := range r.pools {
			p.announced = p.slots - p.busy
		}
	}
	return r.report(), nil
}

// flockRun is one flock simulation: its pools, and the waits and round
// trips of the jobs started so far.
type flockRun struct {
	cfg    FlockConfig
	rng    *rand.Rand
	pools  []*simPool
	waits  []float64
	rttSum float64
	rep    *FlockReport
}

// placePools draws every pool's slots, position and load.
func (r *flockRun) placePools() {
	r.pools = make([]*simPool, r.cfg.Pools)
	for i := range r.pools {
		p := &simPool{slots: 4 + r.rng.IntN(13), x: r.rng.Float64(), y: r.rng.Float64()}
		load := 0.4
		if r.rng.Float64() < r.cfg.Overloaded {
			load = 1.5
		}
		p.lambda = load * float64(p.slots) / r.cfg.Runtime.Seconds()
		p.announced = p.slots
		r.pools[i] = p
	}
}

// orderPools sets the order in which every pool flocks to the others:
// flock.Willing's ranking over every pool's announcement, computed once
// (positions do not move; each step filters it by the announced idle
// slots), shuffled with FlockRandom.
func (r *flockRun) orderPools() error {
	pools := r.pools
	anns := make([]api.FlockAnnouncement, len(pools))
	for i, p := range pools {
		anns[i] = api.FlockAnnouncement{Pool: strconv.Itoa(i), Node: strconv.Itoa(i), FlockCapacity: api.FlockCapacity{IdleSlots: p.slots}}
	}
	any, err := flock.Compile(api.FlockConfig{Name: "any", Out: &api.FlockOut{}})
	if err != nil {
		return err
	}
	for i, p := range pools {
		w := flock.Willing(strconv.Itoa(i), anns, []*flock.Policy{any}, func(node string) (time.Duration, bool) {
			j, _ := strconv.Atoi(node)
			return time.Duration(rtt(p, pools[j]) * float64(time.Second)), true
		})
		p.rtts = map[int]float64{}
		for _, c := range w {
			j, _ := strconv.Atoi(c.Pool)
			p.order = append(p.order, j)
			p.rtts[j] = c.RTT.Seconds()
		}
		if r.cfg.Mode == FlockRandom {
			r.rng.Shuffle(len(p.order), func(a, b int) { p.order[a], p.order[b] = p.order[b], p.order[a] })
		}
	}
	return nil
}

// start starts in p, at now, a job of home's that arrived at arrived.
func (r *flockRun) start(home, p *simPool, arrived, now time.Duration) {
	p.busy++
	run := time.Duration(r.rng.ExpFloat64() * float64(r.cfg.Runtime))
	p.ends = append(p.ends, now+run)
	r.waits = append(r.waits, (now - arrived).Seconds())
	r.rep.Jobs++
	d := 0.0
	if home != p {
		d = distance(home, p)
	}
	r.rep.Distances = append(r.rep.Distances, d)
}

// runOwn frees the slots of p's jobs that ended by now, adds the jobs
// that arrived during the step, and starts p's own jobs in its free slots.
func (r *flockRun) runOwn(p *simPool, now time.Duration) {
	kept := p.ends[:0]
	for _, e := range p.ends {
		if e > now {
			kept = append(kept, e)
		} else {
			p.busy--
		}
	}
	p.ends = kept
	n := poisson(r.rng, p.lambda*r.cfg.Step.Seconds())
	for k := 0; k < n; k++ {
		p.idle = append(p.idle, now-time.Duration(r.rng.Float64()*float64(r.cfg.Step)))
	}
	for len(p.idle) > 0 && p.busy < p.slots {
		r.start(p, p, p.idle[0], now)
		p.idle = p.idle[1:]
	}
}

// runFlocked adds the next pool p flocks to if its jobs waited IdleTime
// (or stops flocking if none waits), and starts those jobs in the idle
// slots of the pools it flocks to.
func (r *flockRun) runFlocked(p *simPool, now time.Duration) {
	idleTime := r.cfg.IdleTime
	waiting := 0
	for _, a := range p.idle {
		if now-a >= idleTime {
			waiting++
		}
	}
	if waiting == 0 {
		p.flocked = 0
		return
	}
	if p.flocked < len(p.order) && (p.flocked == 0 || now-p.lastAdd >= idleTime) {
		p.flocked++
		p.lastAdd = now
	}
	// The pools it flocks to, nearest (or first) first; a pool
	// announced without an idle slot is skipped.
	for _, j := range p.order[:p.flocked] {
		q := r.pools[j]
		if q.announced == 0 {
			continue
		}
		for len(p.idle) > 0 && now-p.idle[0] >= idleTime && q.busy < q.slots {
			r.start(p, q, p.idle[0], now)
			p.idle = p.idle[1:]
			r.rep.Flocked++
			r.rttSum += p.rtts[j]
		}
	}
}

// report completes the report with the jobs left idle, the waits and the
// flocked jobs' mean round trip.
func (r *flockRun) report() *FlockReport {
	rep := r.rep
	for _, p := range r.pools {
		rep.Unstarted += len(p.idle)
	}
	if waits := r.waits; len(waits) > 0 {
		sort.Float64s(waits)
		sum := 0.0
		for _, w := range waits {
			sum += w
		}
		rep.MeanWait = time.Duration(sum / float64(len(waits)) * float64(time.Second))
		rep.P95Wait = time.Duration(waits[len(waits)*95/100] * float64(time.Second))
	}
	if rep.Flocked > 0 {
		rep.MeanRTT = time.Duration(r.rttSum / float64(rep.Flocked) * float64(time.Second))
	}
	return rep
}

// poisson draws from a Poisson distribution of mean m (Knuth's method,
// for the small means of one step).
func poisson(rng *rand.Rand, m float64) int {
	l, k, p := math.Exp(-m), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// WriteFlockCSV writes flock reports as CSV.
func WriteFlockCSV(w io.Writer, reps []*FlockReport) error {
	if _, err := fmt.Fprintln(w, "mode,pools,jobs,flocked,mean_wait_s,p95_wait_s,mean_flock_rtt_ms,unstarted"); err != nil {
		return err
	}
	for _, r := range reps {
		if _, err := fmt.Fprintf(w, "%s,%d,%d,%d,%.1f,%.1f,%.1f,%d\n", r.Mode, r.Pools, r.Jobs, r.Flocked,
			r.MeanWait.Seconds(), r.P95Wait.Seconds(), float64(r.MeanRTT.Microseconds())/1000, r.Unstarted); err != nil {
			return err
		}
	}
	return nil
}

// LocalityPoint is one point of the distribution of how far from their
// own pool jobs ran.
type LocalityPoint struct {
	Mode FlockMode
	// Within is a distance, as a fraction of the sea's diameter.
	Within float64
	// All is the share of the jobs started that ran at most Within from
	// their own pool (those run in their own pool included, at 0);
	// Flocked the share of the flocked jobs only.
	All, Flocked float64
}

// Locality returns the cumulative distribution of rep's jobs' distances
// at each of within (fractions of the diameter, ascending).
func Locality(rep *FlockReport, within []float64) []LocalityPoint {
	ds := append([]float64(nil), rep.Distances...)
	sort.Float64s(ds)
	local := sort.SearchFloat64s(ds, math.SmallestNonzeroFloat64) // the zeros
	out := make([]LocalityPoint, 0, len(within))
	for _, w := range within {
		n := sort.Search(len(ds), func(i int) bool { return ds[i] > w })
		pt := LocalityPoint{Mode: rep.Mode, Within: w}
		if len(ds) > 0 {
			pt.All = float64(n) / float64(len(ds))
		}
		if f := len(ds) - local; f > 0 {
			pt.Flocked = float64(n-local) / float64(f)
		}
		out = append(out, pt)
	}
	return out
}

// WriteLocalityCSV writes locality distributions as CSV.
func WriteLocalityCSV(w io.Writer, pts []LocalityPoint) error {
	if _, err := fmt.Fprintln(w, "mode,within_diameter,all_jobs,flocked_jobs"); err != nil {
		return err
	}
	for _, p := range pts {
		if _, err := fmt.Fprintf(w, "%s,%.2f,%.4f,%.4f\n", p.Mode, p.Within, p.All, p.Flocked); err != nil {
			return err
		}
	}
	return nil
}
